"""Vendor microscopy files (Zeiss CZI, Leica LIF, Nikon ND2, Olympus VSI) by the OME-TIFF rules.

The vendor adapters (`microscopy_vendors.py`) only describe a file (its series, their stack axes,
channels with names and colours, plane size) and read one channel of one plane. The rules live here:

* **Series.** `options.series` picks one: an index (default 0) or the series' name. A multi-series
  file is one sample per series in a build when the manifest says `series: each` (the layout lists
  them); `series_count` and every series name are recorded.
* **Plane.** Z and T are `options.z` / `options.t` (`"middle"`, the default as for every other stack in
  this toolkit, or an index); any other stack axis (spectral λ, mosaic tiles, ...) is held at its
  middle. The chosen index per axis is recorded in `plane`.
* **Size budget.** The output's longest side is `options.max_size`, or the plane's own size while one
  channel plane stays within `PIXEL_BUDGET`; a larger plane shrinks to fit it. Readers with a pyramid
  or a zoomed read (CZI, VSI) are asked for the output size directly; the others (LIF, ND2) hand out
  a memory-mapped plane that is box-reduced band by band, so the whole plane never sits in memory.
  The remaining fraction is a LANCZOS resize of the blended 8-bit image.
* **Colour.** Channels are blended additively exactly as OME-TIFF channels are
  (`tiff.blend_channels`: per-channel 0.5-99.5 percentile window times the channel's colour, the
  file's colour when it has one, else by name, else the palette). RGB (brightfield) planes stay RGB;
  one channel is grey, windowed by percentiles.
* **Masks** (`options.as_mask`): one channel only, label values kept, nearest sampling.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import tifffile

from mmbu.build.convert import display
from mmbu.build.convert.base import ConversionError, Converted, ConvertOptions
from mmbu.build.convert.tiff import PIXEL_BUDGET, blend_channels, grey_channel, rgb_samples
from mmbu.core.geometry import ConversionGeometry

MINISBLACK = tifffile.PHOTOMETRIC.MINISBLACK  # vendor planes are never stored inverted
BAND_ROWS = 512  # plane rows box-reduced at a time when a reader cannot shrink itself


@dataclass(frozen=True)
class Channel:
    name: str | None
    colour: tuple[int, int, int] | None = None  # the file's display colour, if it has one
    colour_source: str = "file"


@dataclass
class Series:
    """One image of a vendor file: its plane size, stack axes and channels."""

    index: int
    name: str
    width: int
    height: int
    dtype: str
    stack: dict[str, int]  # axis -> size for every axis outside the plane and the channels (Z, T, λ, ...)
    channels: list[Channel]
    rgb: bool = False  # the plane holds RGB samples (brightfield), not channels to blend
    pixel_size_um: tuple[float, float] | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # adapter-specific handles (scene id, frame lookup)


class VendorFile(Protocol):
    format: str
    reader: str  # library and version
    scales_natively: bool  # read_plane honours `size` itself (pyramid or zoomed read)
    series: list[Series]

    def read_plane(self, series: Series, plane: dict[str, int], channel: int,
                   size: tuple[int, int] | None) -> np.ndarray: ...

    def close(self) -> None: ...


def convert(path: Path, options: ConvertOptions, opener: Callable[[Path], VendorFile]) -> Converted:
    """Convert one plane of one series of a vendor microscopy file."""
    vendor = opener(path)
    try:
        series = pick_series(vendor.series, options.series, path)
        plane = pick_plane(series, options, path)
        target = output_size(series, options.max_size)
        channels = range(len(series.channels)) if not series.rgb else range(1)
        if options.as_mask and (series.rgb or len(series.channels) != 1):
            raise ConversionError(f"{path} series {series.index} has {len(series.channels)} channels"
                                  f"{' of RGB' if series.rgb else ''}, so it is not a single-channel label mask")
        if options.as_mask and series.width * series.height > PIXEL_BUDGET:
            raise ConversionError(f"{path} series {series.index} is a {series.width}×{series.height} label plane, "
                                  "over the memory budget for masks (read at full resolution, then sampled)")
        stacked, factor = [], 1
        for channel in channels:
            if vendor.scales_natively and not options.as_mask:  # a reader's zoom may interpolate: never for labels
                data = np.asarray(vendor.read_plane(series, plane, channel, target if target != (series.width, series.height) else None))
            else:
                factor = reduce_factor(series, target)
                data = box_reduce(vendor.read_plane(series, plane, channel, None), factor, options.as_mask)
            stacked.append(data if data.ndim == 3 else data[..., None])
    finally:
        vendor.close()
    values = np.concatenate(stacked, axis=-1)
    params: dict[str, Any] = {
        "reader": vendor.reader,
        "series": series.index,
        "series_name": series.name,
        "series_count": len(vendor.series),
        "series_names": [s.name for s in vendor.series],
        "plane": plane,
        "stack": dict(series.stack),
        "read_size": [int(values.shape[1]), int(values.shape[0])],
        "read": ("reader's own (pyramid or zoomed) read at the output size" if vendor.scales_natively
                 and not options.as_mask
                 else "whole plane (memory-mapped)" if factor == 1 else f"box reduce by {factor}, {BAND_ROWS} rows at a time"),
        "dtype": series.dtype,
        "pixel_size_um": list(series.pixel_size_um) if series.pixel_size_um else None,
    }
    if options.as_mask:
        pixels, params["channels"] = display.to_label_image(values[..., 0]), None
    elif series.rgb:
        pixels, params["channels"] = rgb_samples(values[..., :3], None)
    elif values.shape[2] == 1:
        pixels, records = grey_channel(values[..., 0], None, options.window, MINISBLACK, None)
        params["channels"] = [{**records[0], "name": series.channels[0].name}]
    else:
        meta = [{"name": c.name, "colour": c.colour, "source": c.colour_source} for c in series.channels]
        pixels, params["channels"] = blend_channels(values.astype(np.float32, copy=False), meta, None)
    # stored frame: the series' full plane; then the smaller read (pyramid/zoom, or box reduce), then the fit
    read_step = "level" if vendor.scales_natively and not options.as_mask else "resize"
    how = "nearest" if options.as_mask else (None if read_step == "level" else "box")
    geometry = ConversionGeometry.kept((series.width, series.height)).then(
        read_step, (pixels.shape[1], pixels.shape[0]), how=how)
    if (pixels.shape[1], pixels.shape[0]) != target:
        pixels = display.resize_to(pixels, target[1], target[0], is_mask=options.as_mask)
        geometry = geometry.then("resize", target, how="nearest" if options.as_mask else "lanczos")
    return Converted(pixels=pixels, format=vendor.format, frame=None, params=params, geometry=geometry)


def pick_series(all_series: list[Series], wanted: int | str, path: Path) -> Series:
    """The series `wanted` names: an index or a series name."""
    if not all_series:
        raise ConversionError(f"{path} holds no image series")
    if isinstance(wanted, int) and not isinstance(wanted, bool):
        if 0 <= wanted < len(all_series):
            return all_series[wanted]
        raise ConversionError(f"series {wanted} is outside 0..{len(all_series) - 1} of {path}")
    for series in all_series:
        if series.name == wanted:
            return series
    names = ", ".join(repr(s.name) for s in all_series[:10])
    raise ConversionError(f"{path} has no series named {wanted!r} (its series: {names})")


def pick_plane(series: Series, options: ConvertOptions, path: Path) -> dict[str, int]:
    """Index of every stack axis: Z and T from the options, the others at their middle."""
    chosen = {}
    for axis, size in series.stack.items():
        wanted = {"Z": options.z, "T": options.t}.get(axis, "middle")
        if wanted == "middle":
            chosen[axis] = size // 2
        elif isinstance(wanted, int) and 0 <= wanted < size:
            chosen[axis] = wanted
        else:
            raise ConversionError(f"{axis} index {wanted!r} is outside 0..{size - 1} of series {series.index} in {path}")
    for axis, wanted in (("Z", options.z), ("T", options.t)):
        if axis not in series.stack and wanted not in ("middle", 0):
            raise ConversionError(f"series {series.index} of {path} has no {axis} axis, so {axis} index {wanted} "
                                  "does not exist")
    return chosen


def output_size(series: Series, max_size: int | None) -> tuple[int, int]:
    """(width, height) of the output: fit `max_size`, or shrink a plane over the budget to fit it."""
    width, height = series.width, series.height
    if max_size is None:
        if width * height <= PIXEL_BUDGET:
            return width, height
        scale = math.sqrt(PIXEL_BUDGET / (width * height))
        return max(1, int(width * scale)), max(1, int(height * scale))
    out_height, out_width = display.output_size(height, width, max_size)
    return out_width, out_height


def reduce_factor(series: Series, target: tuple[int, int]) -> int:
    """The integer box factor that leaves the plane still at least `target` (LANCZOS does the rest)."""
    return max(1, int(math.floor(min(series.width / target[0], series.height / target[1]) + 1e-9)))


def box_reduce(plane: np.ndarray, factor: int, is_mask: bool) -> np.ndarray:
    """Shrink a (possibly memory-mapped) plane by an integer factor, `BAND_ROWS` rows at a time.

    Images: the mean of each factor×factor block (float32; edge blocks padded by repetition).
    Masks: the value at each block's centre pixel (labels never mix).
    """
    if factor == 1:
        return np.array(plane)
    height, width = plane.shape[:2]
    if is_mask:
        rows = np.minimum(np.arange(-(-height // factor)) * factor + factor // 2, height - 1)
        columns = np.minimum(np.arange(-(-width // factor)) * factor + factor // 2, width - 1)
        return np.asarray(plane[rows][:, columns])
    out = np.empty((-(-height // factor), -(-width // factor)) + plane.shape[2:], np.float32)
    band = factor * max(1, BAND_ROWS // factor)
    for start in range(0, height, band):
        block = np.asarray(plane[start:start + band], dtype=np.float32)
        pad_rows, pad_columns = -block.shape[0] % factor, -width % factor
        if pad_rows or pad_columns:
            block = np.pad(block, [(0, pad_rows), (0, pad_columns)] + [(0, 0)] * (block.ndim - 2), mode="edge")
        shape = (block.shape[0] // factor, factor, block.shape[1] // factor, factor) + block.shape[2:]
        out[start // factor:start // factor + shape[0]] = block.reshape(shape).mean(axis=(1, 3))
    return out
