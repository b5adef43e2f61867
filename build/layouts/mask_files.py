"""Masks paired with images by templates with named parts: one file per object (DSB2018), further
files for further instances (BUSI's `_mask_1`), label volumes with another name (KiTS19), JPEG masks.

Every object of an image, from however many files, is gathered into one instance-id mask in the
layout cache (`instances.InstanceCanvas`), so the later steps see one mask file per image as usual.
NIfTI pairs keep their volume (the slice is the converter's choice, see `volumes`).
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import numpy as np
from PIL import Image

from mmbu.build.layouts.channel_files import ImageFiles, compose, image_files, part_of
from mmbu.build.layouts.colour_masks import colour_objects, read_rgb
from mmbu.build.layouts.context import LayoutContext
from mmbu.build.layouts.files import image_size, is_volume
from mmbu.build.layouts.instances import InstanceCanvas
from mmbu.build.layouts.mask_pairs import read_label_mask, read_volume_pair
from mmbu.build.layouts.masks import ColourMaskError, MaskError, MaskRules, read_mask, snap_lossy_values, value_boxes
from mmbu.build.layouts.rank_pairing import RankPairs
from mmbu.core import budget
from mmbu.core.budget import OverBudget
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
    if layout.object_colors:  # the colours tell the objects apart: read as values, one per colour
        return False
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
    try:
        canvas = InstanceCanvas(height=size[1], width=size[0], name=ctx.rel(image))
    except OverBudget as exc:
        ctx.exclude(ctx.rel(image), str(exc))
        return
    provenance: dict[str, str] = {}
    for mask_path, mask_parts in masks:
        label = _label(layout, item.parts, mask_parts)
        try:
            if layout.object_colors:
                rgb, lossy = read_rgb(mask_path)
                values, note = colour_objects(rgb, parse_colour(layout.background_color), lossy=lossy,
                                              name=mask_path.name)
                lossy = False
            elif _binary(layout, label):
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
        objects, describe, note = _objects(layout, values, lossy, label)
        if layout.objects == "file" and layout.empty_masks == "absent" and not objects.any():
            provenance[f"mask {ctx.rel(mask_path)}"] = f"empty: no {label or ''} in this image"
            continue
        covered = int((canvas.ids[objects != 0] != 0).sum())
        try:
            if layout.objects == "file":  # one object, even an empty one (reported as such by `regions`)
                canvas.paint(objects.view(bool), label or "", ctx.rel(mask_path))
            else:
                canvas.paint_plane(objects, 0, object_label_of(ctx.rel(mask_path), describe))
        except OverBudget as exc:
            ctx.exclude(ctx.rel(image), str(exc))
            return
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
        ctx.add_derived(image, part_of(layout.channels), lambda: compose(item.paths, layout.channels),
                        regions=regions, mask=canvas.ids, grounded=True, sources=item.paths[1:],
                        provenance={**provenance, "channels": ", ".join(ctx.rel(p) for p in item.paths)})
        return
    mask_path = ctx.store_mask(image, canvas.ids, [path for path, _ in masks])
    ctx.add(image, regions=regions, mask_path=mask_path, size=size, grounded=True, provenance=provenance)


def _objects(layout: MaskFilesLayout, values: np.ndarray, lossy: bool, label: str | None
             ) -> tuple[np.ndarray, Callable[[int], tuple[str, str]], str | None]:
    """The objects of one mask file as a plane of object ids (0 none), what each id is (suffix of its instance
    key, raw label: `object_label_of` names it after the file) and the provenance note. Linear in the pixels:
    components are labelled inside their value's box, never one full-size mask per object."""
    from scipy import ndimage  # here: a no-op rebuild never loads scipy
    if _binary(layout, label):  # `values` is the foreground (`object_pixels`)
        if layout.objects == "file":
            return values.view(np.uint8), lambda _: ("", label or ""), None
        components, _ = ndimage.label(values)
        return components, lambda index: (f"#c{index}", label or ""), None
    note = None
    if lossy:
        values, note = snap_lossy_values(values, layout.background, list(layout.mask_values))
    rules = MaskRules.of(layout, default_label=label)
    found = {value: box for value, (box, _) in value_boxes(values).items() if value != layout.background}

    def named(value: int) -> str:
        return (rules.instance_label if layout.objects == "ids" else rules.label_of(value)) or str(value)

    if layout.objects != "components":
        prefix = "id" if layout.objects == "ids" else "v"
        if layout.background == 0 and values.dtype.kind in "iu":  # the values are the object ids already
            return values, lambda value: (f"#{prefix}{value}", named(value)), note
        ordered = sorted(found)  # else numbered 1, 2, ... in ascending order of value
        plane = np.zeros(values.shape, np.int32)
        where = values != layout.background
        plane[where] = np.searchsorted(np.asarray(ordered), values[where]) + 1
        return plane, lambda key: (f"#{prefix}{ordered[key - 1]}", named(ordered[key - 1])), note
    budget.check_instances("the mask", len(found))
    plane = np.zeros(values.shape, np.int32)
    keys: dict[int, tuple[str, str]] = {}
    for value, box in found.items():
        components, count = ndimage.label(values[box] == value)
        budget.check_instances("the mask", len(keys) + count)
        inside = components != 0
        plane[box][inside] = components[inside] + len(keys)
        keys.update({len(keys) + index: (f"#v{value}-c{index}", named(value)) for index in range(1, count + 1)})
    return plane, keys.__getitem__, note


def object_label_of(source: str, describe: Callable[[int], tuple[str, str]]) -> Callable[[int], tuple[str, str]]:
    """An object id of a mask file's plane -> (raw label, instance key `<file>#...`) for `paint_plane`."""
    def named(key: int) -> tuple[str, str]:
        suffix, label = describe(key)
        return label, f"{source}{suffix}"
    return named
