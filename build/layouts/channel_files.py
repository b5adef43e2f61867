"""One sample composed from per-channel files (CELLULAR's `images/<field>_w1.TIF`, `_w2.TIF`, `_w3.TIF`).

The files of one sample match the image template with the same named parts except the channel part
(`ChannelFiles.part`). They are stacked, in the manifest's order, into one OME-TIFF written losslessly into the layout
cache (dtype kept), each channel named by its part value and given the manifest's colour in OME's `Color`: the
converter then blends it as it blends any multi-channel fluorescence file, each channel scaled by its own percentile
window, so no channel is windowed or rounded here.
"""
from __future__ import annotations

import io
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mmbu.build.layouts.context import LayoutContext
from mmbu.build.layouts.derived import DerivedImageError
from mmbu.curation.manifest.layout_shapes import ChannelFiles
from mmbu.curation.manifest.templates import PathTemplate


@dataclass(frozen=True)
class ImageFiles:
    """The file(s) of one sample and the named parts they share: one file, or one per channel in stacking order."""

    paths: tuple[Path, ...]
    parts: dict[str, str]

    @property
    def first(self) -> Path:
        return self.paths[0]

    @property
    def composed(self) -> bool:
        return len(self.paths) > 1


def image_files(ctx: LayoutContext, template: PathTemplate, channels: ChannelFiles | None) -> Iterator[ImageFiles]:
    """The samples' files the image template finds: each file alone, or with `channels`, the files of each channel
    grouped (a group missing a channel is reported, files of channels not named are left out)."""
    if channels is None:
        for path, parts in template.scan(ctx.raw_dir):
            yield ImageFiles((path,), parts)
        return
    groups: dict[tuple[tuple[str, str], ...], dict[str, Path]] = defaultdict(dict)
    for path, parts in template.scan(ctx.raw_dir):
        value = parts[channels.part]
        if value in channels.colors:
            groups[tuple((n, v) for n, v in parts.items() if n != channels.part)][value] = path
    for key, found in groups.items():
        missing = [value for value in channels.colors if value not in found]
        shared = dict(key)
        if missing:
            expected = ", ".join(template.fill({**shared, channels.part: value}) for value in missing)
            ctx.exclude(ctx.rel(next(iter(found.values()))), f"the sample misses its channel file(s) {expected}")
            continue
        yield ImageFiles(tuple(found[value] for value in channels.colors), shared)


def part_of(channels: ChannelFiles) -> str:
    """The part of a composed sample's id that names its channels: `channels=w1,w2,w3`."""
    return "channels=" + ",".join(channels.colors)


def compose(paths: tuple[Path, ...], channels: ChannelFiles) -> bytes:
    """The channel files stacked (C, Y, X) as OME-TIFF bytes with each channel's name and colour; DerivedImageError
    naming the file when one is not a grey image of the others' size and type."""
    planes = [_grey_plane(path) for path in paths]
    first = planes[0]
    for path, plane in zip(paths[1:], planes[1:]):
        if plane.shape != first.shape:
            raise DerivedImageError(f"channel file {path.name} is {plane.shape[1]}x{plane.shape[0]} but "
                                    f"{paths[0].name} is {first.shape[1]}x{first.shape[0]}")
    stack = np.stack([plane.astype(np.result_type(*planes)) for plane in planes])
    import tifffile

    buffer = io.BytesIO()
    tifffile.imwrite(buffer, stack, ome=True, photometric="minisblack", compression="zlib",
                     metadata={"axes": "CYX", "Channel": {"Name": list(channels.colors),
                                                         "Color": [_ome_colour(c) for c in channels.rgb()]}})
    return buffer.getvalue()


def _grey_plane(path: Path) -> np.ndarray:
    try:
        if path.suffix.lower() in (".tif", ".tiff"):
            import tifffile

            array = np.asarray(tifffile.imread(path, key=0))
        else:
            from PIL import Image

            with Image.open(path) as image:
                array = np.asarray(image)
    except Exception as exc:  # noqa: BLE001 - every reader raises its own types; the sentence names the file
        raise DerivedImageError(f"channel file {path.name} cannot be read ({exc})") from None
    if array.ndim == 3 and all(np.array_equal(array[..., 0], array[..., c]) for c in range(1, min(3, array.shape[-1]))):
        array = array[..., 0]  # a grey channel saved as RGB
    if array.ndim != 2:
        raise DerivedImageError(f"channel file {path.name} is not one grey channel (shape {array.shape})")
    return array


def _ome_colour(rgb: tuple[int, int, int]) -> int:
    """OME's Color: RGBA packed into a signed 32-bit integer (opaque)."""
    packed = (rgb[0] << 24) | (rgb[1] << 16) | (rgb[2] << 8) | 255
    return packed - (1 << 32) if packed >= 1 << 31 else packed
