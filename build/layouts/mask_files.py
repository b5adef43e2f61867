"""Masks paired with images by templates with named parts: one file per object (DSB2018), further
files for further instances (BUSI's `_mask_1`), label volumes with another name (KiTS19), JPEG masks.

Every object of an image, from however many files, is gathered into one instance-id mask in the
layout cache (`instances.InstanceCanvas`), so the later steps see one mask file per image as usual.
NIfTI pairs keep their volume (the slice is the converter's choice, see `volumes`).
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import numpy as np
from PIL import Image

from mmbu.build.layouts.channel_files import ImageFiles, compose, frame_of, image_files
from mmbu.build.layouts.colour_masks import read_rgb
from mmbu.build.layouts.context import LayoutContext
from mmbu.build.layouts.files import image_size, is_volume
from mmbu.build.layouts.instances import InstanceCanvas
from mmbu.build.layouts.mask_pairs import read_label_mask, read_volume_pair
from mmbu.build.layouts.masks import ColourMaskError, MaskError, MaskRules, read_mask, snap_lossy_values
from mmbu.build.layouts.rank_pairing import RankPairs
from mmbu.curation.manifest.layout import MaskFilesLayout
from mmbu.curation.manifest.layout_base import parse_colour
from mmbu.curation.manifest.templates import PathTemplate

LOSSY_DEFAULT_THRESHOLD = 128  # midway between a JPEG mask's 0 and 255
JPEG_GREY_SPREAD = 48  # channels of a grey JPEG drift apart by compression noise; a colour mask's by far more


def read(layout: MaskFilesLayout, ctx: LayoutContext) -> None:
    channels = layout.channels
    image_template = PathTemplate(layout.image, {channels.part: channels.colors} if channels else None)
    mask_templates = [PathTemplate(t) for t in layout.masks]
    images = list(image_files(ctx, image_template, channels))
    pairs = (RankPairs(ctx, images, image_template, mask_templates[0]) if layout.pair_by == "rank"
             else _MaskIndex(ctx.raw_dir, image_template, mask_templates))
    for item in images:
        if item.first in pairs.files or item.first in pairs.reported:
            continue  # `{stem}.png` also matches `{stem}_mask.png`: a mask is never an image
        masks = pairs.for_image(item)
        if not masks:
            if item.composed or not ctx.list_unannotated_slide_instance(item.first):
                ctx.exclude(ctx.rel(item.first), f"no mask file matching {' or '.join(map(repr, layout.masks))} "
                                                 f"for this image")
            continue
        pairs.used.update(path for path, _ in masks)
        volume = any(is_volume(path) for path in item.paths) or any(is_volume(path) for path, _ in masks)
        if volume and item.composed:
            ctx.exclude(ctx.rel(item.first), "channels compose flat images; a volume's channels cannot be stacked here")
        elif volume:
            _read_volume(layout, ctx, item.first, item.parts, masks)
        else:
            _read_flat(layout, ctx, item, masks)
    for path in sorted(pairs.files - pairs.used):
        ctx.exclude(ctx.rel(path), "mask without a matching image")


class _MaskIndex:
    """Every mask file, found once, indexed by the parts it shares with the image template."""

    def __init__(self, raw_dir: Path, image: PathTemplate, templates: list[PathTemplate]) -> None:
        self.files: set[Path] = set()
        self.used: set[Path] = set()
        self.reported: set[Path] = set()  # nothing is reported before pairing by parts
        self._by_key: list[tuple[tuple[str, ...], dict[tuple[str, ...], list[tuple[Path, dict]]]]] = []
        for template in templates:
            shared = tuple(n for n in template.names if n in image.names)
            index: dict[tuple[str, ...], list[tuple[Path, dict]]] = defaultdict(list)
            for path, parts in template.scan(raw_dir):
                index[tuple(parts[n] for n in shared)].append((path, parts))
                self.files.add(path)
            self._by_key.append((shared, index))

    def for_image(self, item: ImageFiles) -> list[tuple[Path, dict[str, str]]]:
        """The image's mask files with their parts: template by template, then by path. Several images may share
        one mask file (an in-phase and an out-of-phase series, the channel files of one sample)."""
        found: list[tuple[Path, dict[str, str]]] = []
        for shared, index in self._by_key:
            found += [mask for mask in index.get(tuple(item.parts[n] for n in shared), []) if mask[0] not in
                      {path for path, _ in found}]
        return found


def _label(layout: MaskFilesLayout, image_parts: dict[str, str], mask_parts: dict[str, str]) -> str | None:
    if layout.label_part is not None:
        return mask_parts.get(layout.label_part, image_parts.get(layout.label_part))
    return layout.label


def _read_volume(layout: MaskFilesLayout, ctx: LayoutContext, image: Path, parts: dict[str, str],
                 masks: list[tuple[Path, dict[str, str]]]) -> None:
    if len(masks) != 1 or layout.objects == "file":
        ctx.exclude(ctx.rel(image), f"a volume pairs with one label volume whose values are the objects; found "
                                    f"{len(masks)} mask file(s) with objects: {layout.objects}")
        return
    mask, mask_parts = masks[0]
    read_volume_pair(ctx, image, mask, MaskRules.of(layout, default_label=_label(layout, parts, mask_parts)))


def read_mask_file(path: Path) -> tuple[np.ndarray, bool]:
    """(label values, lossy): JPEG masks are read as grey levels (their colour channels differ by noise)."""
    try:
        with Image.open(path) as image:
            if image.format == "JPEG":
                return np.asarray(image.convert("L")), True
    except Exception:  # noqa: BLE001 - not a Pillow format (TIFF pages Pillow cannot read): read_mask decides
        pass
    return read_mask(path), False


def _binary(layout: MaskFilesLayout, label: str | None) -> bool:
    """Whether a mask file is read as foreground and background (one object, or connected pieces of one class)."""
    return layout.objects == "file" or (layout.objects == "components" and label is not None)


def object_pixels(layout: MaskFilesLayout, path: Path) -> tuple[np.ndarray, str | None]:
    """The foreground of a mask file read as one class, and a provenance note. A grey mask: values from `threshold`
    up (128 for JPEG), else every value but `background`. A colour mask, whose colour only marks the object
    (CELLULAR paints each cell's file a colour that says nothing): every pixel not of `background_color`, or, in a
    JPEG, every pixel whose largest channel difference from it reaches the threshold (a dark blue object's grey
    level would fall under it)."""
    try:
        values, lossy = read_mask_file(path)
        rgb = _coloured_jpeg(path) if lossy else None
    except ColourMaskError:
        rgb, lossy = read_rgb(path)
    if rgb is None:
        threshold = layout.threshold or (LOSSY_DEFAULT_THRESHOLD if lossy else None)
        if threshold:
            return values >= threshold, f"threshold {threshold}: values >= {threshold} are the object"
        return values != layout.background, None
    distance = np.abs(rgb.astype(np.int16) - np.array(parse_colour(layout.background_color), np.int16)).max(axis=-1)
    threshold = layout.threshold or (LOSSY_DEFAULT_THRESHOLD if lossy else None)
    if threshold:
        return distance >= threshold, (f"threshold {threshold}: pixels whose channels differ from the background "
                                       f"colour by {threshold} or more are the object")
    return distance > 0, (f"colour mask: every pixel not of the background colour {layout.background_color} is the "
                          "object")


def _coloured_jpeg(path: Path) -> np.ndarray | None:
    """A JPEG mask's colours when it is in colour (channels apart by more than compression noise), else None."""
    rgb, _ = read_rgb(path)
    spread = rgb.max(axis=-1).astype(np.int16) - rgb.min(axis=-1)
    return rgb if int(spread.max(initial=0)) > JPEG_GREY_SPREAD else None


def _read_flat(layout: MaskFilesLayout, ctx: LayoutContext, item: ImageFiles,
               masks: list[tuple[Path, dict[str, str]]]) -> None:
    image = item.first
    size = image_size(image)
    if size is None:
        ctx.exclude(ctx.rel(image), "the image size cannot be read, so its masks cannot be checked against it")
        return
    canvas = InstanceCanvas(height=size[1], width=size[0])
    provenance: dict[str, str] = {}
    for mask_path, mask_parts in masks:
        label = _label(layout, item.parts, mask_parts)
        try:
            if _binary(layout, label):
                values, note = object_pixels(layout, mask_path)
                lossy = False
            elif layout.mask_colors:  # the colours become values: nothing lossy is left to snap
                values, note = read_label_mask(layout, mask_path)
                lossy = False
            else:
                (values, lossy), note = read_mask_file(mask_path), None
        except MaskError as exc:
            ctx.exclude(ctx.rel(mask_path), str(exc))
            continue
        if note:
            provenance[f"mask {ctx.rel(mask_path)}"] = note
        if values.shape != canvas.shape:
            ctx.exclude(ctx.rel(mask_path), f"the mask is {values.shape[1]}x{values.shape[0]} but its image is "
                                            f"{size[0]}x{size[1]}")
            continue
        if lossy and layout.objects == "ids":
            ctx.exclude(ctx.rel(mask_path), "instance ids cannot be recovered from a lossy (JPEG) mask")
            continue
        for instance, object_label, where, note in _objects(layout, ctx.rel(mask_path), values, lossy, label):
            if layout.empty_masks == "absent" and not where.any():
                provenance[f"mask {ctx.rel(mask_path)}"] = f"empty: no {object_label} in this image"
                continue
            covered = int((canvas.ids[where] != 0).sum())
            canvas.paint(where, object_label, instance)
            if note:
                provenance[f"mask {ctx.rel(mask_path)}"] = note
            if covered:  # painter's order: say where a later object took pixels of an earlier one
                provenance[f"overlap {ctx.rel(mask_path)}"] = f"{covered} pixels drawn over earlier objects"
    regions, problems = canvas.regions(layout.min_region_pixels)
    for instance, reason in problems:
        ctx.exclude(f"{ctx.rel(image)}#{instance}", reason)
    if not regions:
        if not problems:
            ctx.exclude(ctx.rel(image), "its mask files hold no object")
        return
    if item.composed:  # the channel files become one image in the layout cache, its mask beside it
        ctx.add_derived(image, frame_of(layout.channels), lambda: compose(item.paths, layout.channels),
                        regions=regions, mask=canvas.ids, grounded=True, sources=item.paths[1:],
                        provenance={**provenance, "channels": ", ".join(ctx.rel(p) for p in item.paths)})
        return
    mask_path = ctx.store_mask(image, canvas.ids, [path for path, _ in masks])
    ctx.add(image, regions=regions, mask_path=mask_path, size=size, grounded=True, provenance=provenance)


def _objects(layout: MaskFilesLayout, source: str, values: np.ndarray, lossy: bool, label: str | None
             ) -> Iterator[tuple[str, str, np.ndarray, str | None]]:
    """(instance key, raw label, boolean mask, provenance note) of each object in one mask file."""
    from scipy import ndimage  # here: a no-op rebuild never loads scipy
    if _binary(layout, label):  # `values` is the foreground (`object_pixels`)
        if layout.objects == "file":
            yield source, label or "", values, None
            return
        components, count = ndimage.label(values)
        for index in range(1, count + 1):
            yield f"{source}#c{index}", label or "", components == index, None
        return
    note = None
    if lossy:
        values, note = snap_lossy_values(values, layout.background, list(layout.mask_values))
    rules = MaskRules.of(layout, default_label=label)
    for value in (int(v) for v in np.unique(values) if int(v) != layout.background):
        where = values == value
        object_label = rules.instance_label if layout.objects == "ids" else rules.label_of(value)
        if layout.objects == "components":
            components, count = ndimage.label(where)
            for index in range(1, count + 1):
                yield f"{source}#v{value}-c{index}", object_label or str(value), components == index, note
        else:
            prefix = "id" if layout.objects == "ids" else "v"
            yield f"{source}#{prefix}{value}", object_label or str(value), where, note
