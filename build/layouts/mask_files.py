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

from mmbu.build.layouts.context import LayoutContext
from mmbu.build.layouts.files import image_size, is_volume
from mmbu.build.layouts.instances import InstanceCanvas
from mmbu.build.layouts.mask_pairs import read_label_mask, read_volume_pair
from mmbu.build.layouts.masks import MaskError, MaskRules, read_mask, value_boxes
from mmbu.core import budget
from mmbu.core.budget import OverBudget
from mmbu.curation.manifest.layout import MaskFilesLayout
from mmbu.curation.manifest.templates import PathTemplate

LOSSY_DEFAULT_THRESHOLD = 128  # midway between a JPEG mask's 0 and 255


def read(layout: MaskFilesLayout, ctx: LayoutContext) -> None:
    image_template = PathTemplate(layout.image)
    mask_index = _MaskIndex(ctx.raw_dir, image_template, [PathTemplate(t) for t in layout.masks])
    for image, parts in image_template.scan(ctx.raw_dir):
        if image in mask_index.files:
            continue  # `{stem}.png` also matches `{stem}_mask.png`: a mask is never an image
        masks = mask_index.for_image(parts)
        if not masks:
            if not ctx.list_unannotated_slide_instance(image):
                ctx.exclude(ctx.rel(image), f"no mask file matching {' or '.join(map(repr, layout.masks))} "
                                            f"for this image")
            continue
        mask_index.used.update(path for path, _ in masks)
        if is_volume(image) or any(is_volume(path) for path, _ in masks):
            _read_volume(layout, ctx, image, parts, masks)
        else:
            _read_flat(layout, ctx, image, parts, masks)
    for path in sorted(mask_index.files - mask_index.used):
        ctx.exclude(ctx.rel(path), "mask without a matching image")


class _MaskIndex:
    """Every mask file, found once, indexed by the parts it shares with the image template."""

    def __init__(self, raw_dir: Path, image: PathTemplate, templates: list[PathTemplate]) -> None:
        self.files: set[Path] = set()
        self.used: set[Path] = set()
        self._by_key: list[tuple[tuple[str, ...], dict[tuple[str, ...], list[tuple[Path, dict]]]]] = []
        for template in templates:
            shared = tuple(n for n in template.names if n in image.names)
            index: dict[tuple[str, ...], list[tuple[Path, dict]]] = defaultdict(list)
            for path, parts in template.scan(raw_dir):
                index[tuple(parts[n] for n in shared)].append((path, parts))
                self.files.add(path)
            self._by_key.append((shared, index))

    def for_image(self, parts: dict[str, str]) -> list[tuple[Path, dict[str, str]]]:
        """The image's mask files with their parts: template by template, then by path."""
        found: list[tuple[Path, dict[str, str]]] = []
        for shared, index in self._by_key:
            found += [item for item in index.get(tuple(parts[n] for n in shared), []) if item[0] not in
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


def _read_flat(layout: MaskFilesLayout, ctx: LayoutContext, image: Path, parts: dict[str, str],
               masks: list[tuple[Path, dict[str, str]]]) -> None:
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
        try:
            if layout.mask_colors:  # the colours become values: nothing lossy is left to snap
                values, colour_note = read_label_mask(layout, mask_path)
                lossy = False
                provenance[f"mask {ctx.rel(mask_path)}"] = colour_note
            else:
                values, lossy = read_mask_file(mask_path)
        except MaskError as exc:
            ctx.exclude(ctx.rel(mask_path), str(exc))
            continue
        if values.shape != canvas.shape:
            ctx.exclude(ctx.rel(mask_path), f"the mask is {values.shape[1]}x{values.shape[0]} but its image is "
                                            f"{size[0]}x{size[1]}")
            continue
        if lossy and layout.objects == "ids":
            ctx.exclude(ctx.rel(mask_path), "instance ids cannot be recovered from a lossy (JPEG) mask")
            continue
        label = _label(layout, parts, mask_parts)
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
    mask_path = ctx.store_mask(image, canvas.ids, [path for path, _ in masks])
    ctx.add(image, regions=regions, mask_path=mask_path, size=size, grounded=True, provenance=provenance)


def _objects(layout: MaskFilesLayout, values: np.ndarray, lossy: bool, label: str | None
             ) -> tuple[np.ndarray, Callable[[int], tuple[str, str]], str | None]:
    """The objects of one mask file as a plane of object ids (0 none), what each id is (`object_label_of` turns it
    into (raw label, instance key)), and the provenance note. Linear in the pixels: components are labelled inside
    their value's box."""
    from scipy import ndimage  # here: a no-op rebuild never loads scipy
    binary = layout.objects == "file" or (layout.objects == "components" and label is not None)
    if binary:
        threshold = layout.threshold or (LOSSY_DEFAULT_THRESHOLD if lossy else None)
        where = values >= threshold if threshold else values != layout.background
        note = f"threshold {threshold}: values >= {threshold} are the object" if threshold else None
        if layout.objects == "file":
            return where.view(np.uint8), lambda _: ("", label or ""), note
        components, _ = ndimage.label(where)
        return components, lambda index: (f"#c{index}", label or ""), note
    note = None
    if lossy:
        values, note = _snap_lossy(values, layout)
    rules = MaskRules.of(layout, default_label=label)
    found = {value: box for value, (box, _) in value_boxes(values).items() if value != layout.background}

    def named(value: int) -> str:
        return (rules.instance_label if layout.objects == "ids" else rules.label_of(value)) or str(value)

    if layout.objects != "components":
        plane = values if layout.background == 0 and values.dtype.kind in "iu" and (values.min(initial=0) >= 0) \
            else _shifted(values, layout.background, found)
        prefix = "id" if layout.objects == "ids" else "v"
        original = {int(k): v for k, v in enumerate(sorted(found), start=1)} if plane is not values else None
        return plane, lambda key: (f"#{prefix}{original[key] if original else key}",
                                   named(original[key] if original else key)), note
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


def _shifted(values: np.ndarray, background: int, found: dict[int, object]) -> np.ndarray:
    """The mask with its non-background values numbered 1, 2, ... in ascending order (0 for the background)."""
    ordered = np.asarray(sorted(found))
    plane = np.zeros(values.shape, np.int32)
    where = values != background
    plane[where] = np.searchsorted(ordered, values[where]) + 1
    return plane


def object_label_of(source: str, object_label: Callable[[int], tuple[str, str]]
                    ) -> Callable[[int], tuple[str, str]]:
    """An object id of a mask file's plane -> (raw label, instance key `<file>#...`) for `paint_plane`."""
    def describe(key: int) -> tuple[str, str]:
        suffix, name = object_label(key)
        return name, f"{source}{suffix}"
    return describe


def _snap_lossy(values: np.ndarray, layout: MaskFilesLayout) -> tuple[np.ndarray, str]:
    """A JPEG label mask back to its declared values: each pixel takes the nearest one, then every class
    loses the structures thinner than three pixels (ringing along an edge between two other classes)."""
    from scipy import ndimage  # here: a no-op rebuild never loads scipy
    declared = np.array(sorted({layout.background, *layout.mask_values}), dtype=np.int32)
    nearest = declared[np.abs(values.astype(np.int32)[..., None] - declared).argmin(axis=-1)]
    cleaned = np.full_like(nearest, layout.background)
    for value in declared:
        if value != layout.background:
            cleaned[ndimage.binary_opening(nearest == value, structure=np.ones((3, 3), bool))] = value
    return cleaned, (f"lossy mask: each pixel snapped to the nearest of {', '.join(map(str, declared))}, "
                     "structures thinner than 3 pixels removed")
