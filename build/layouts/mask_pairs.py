"""Image files with same-stem masks (PNG, TIFF or NIfTI label volumes), or with their mask in a panel of the same
file (`panels`)."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from mmbu.build.layouts import panels
from mmbu.build.layouts.colour_masks import colour_objects, colour_values, read_rgb
from mmbu.build.layouts.context import LayoutContext
from mmbu.build.layouts.files import glob_files, image_size, is_volume, stem, volume_shape
from mmbu.build.layouts.masks import MaskError, MaskRules, read_mask, regions_from_mask
from mmbu.build.layouts.sample import Region
from mmbu.core.budget import OverBudget
from mmbu.curation.manifest.layout import ImageMaskPairsLayout, MaskFilesLayout
from mmbu.curation.manifest.layout_base import parse_colour


def _mask_key(path: Path, suffix: str) -> str:
    name = stem(path)
    return name[: -len(suffix)] if suffix and name.endswith(suffix) else name


def read(layout: ImageMaskPairsLayout, ctx: LayoutContext) -> None:
    if layout.panels is not None:  # each file holds its image and its mask
        panels.read(layout, ctx)
        return
    masks: dict[str, Path] = {}
    for mask in glob_files(ctx.raw_dir, layout.masks):
        masks.setdefault(_mask_key(mask, layout.mask_suffix), mask)
    mask_files = set(masks.values())  # a set: a list lookup per image is quadratic in the pairs
    images = [p for p in glob_files(ctx.raw_dir, layout.images) if p not in mask_files]
    used: set[str] = set()
    for image in images:
        key = stem(image)
        mask = masks.get(key)
        if mask is None:
            if ctx.list_unannotated_slide_instance(image):
                continue
            ctx.exclude(ctx.rel(image), f"no mask matching {layout.masks!r} with stem {key + layout.mask_suffix!r}")
            continue
        used.add(key)
        if is_volume(image) or is_volume(mask):
            read_volume_pair(ctx, image, mask, MaskRules.of(layout))
        else:
            _read_flat_pair(layout, ctx, image, mask)
    for key in sorted(set(masks) - used):
        ctx.exclude(ctx.rel(masks[key]), "mask without a matching image")


def _read_flat_pair(layout: ImageMaskPairsLayout, ctx: LayoutContext, image: Path, mask_path: Path) -> None:
    try:
        mask, note = read_label_mask(layout, mask_path)
    except MaskError as exc:
        ctx.exclude(ctx.rel(mask_path), str(exc))
        return
    size = image_size(image, ctx.facts(image).dicom)
    if size is not None and mask.shape != (size[1], size[0]):
        ctx.exclude(ctx.rel(mask_path), f"the mask is {mask.shape[1]}x{mask.shape[0]} but its image is "
                                        f"{size[0]}x{size[1]}")
        return
    try:
        regions = regions_from_mask(mask, layout, ctx.rel(mask_path))
    except OverBudget as exc:
        ctx.exclude(ctx.rel(mask_path), str(exc))
        return
    provenance = {}
    if note is not None:  # a colour mask: the label mask made from it is what the later steps read
        provenance = {f"mask {ctx.rel(mask_path)}": note}
        mask_path = ctx.store_mask(image, mask, [mask_path])
    ctx.add(image, regions=regions, mask_path=mask_path, size=size, grounded=True, provenance=provenance)


def read_label_mask(layout: ImageMaskPairsLayout | MaskFilesLayout, path: Path) -> tuple[np.ndarray, str | None]:
    """A mask file's label values, and for an RGB colour mask (`mask_colors`) the note saying how its
    colours became values (None when the file itself is the label mask)."""
    if getattr(layout, "object_colors", False):
        rgb, lossy = read_rgb(path)
        return colour_objects(rgb, parse_colour(layout.background_color), lossy=lossy, name=path.name)
    if not layout.mask_colors:
        return read_mask(path), None
    rgb, lossy = read_rgb(path)
    return colour_values(rgb, list(layout.colours), parse_colour(layout.background_color), lossy=lossy,
                         other_is_background=layout.other_colors == "background")


def read_volume_pair(ctx: LayoutContext, image: Path, mask_path: Path, rules: MaskRules) -> None:
    """Volumes: check the grids agree and list the values present; boxes come from the converted slice."""
    try:
        image_shape = volume_shape(image)[:3]
        volume = read_mask(mask_path)
    except Exception as exc:  # noqa: BLE001 - nibabel, ITK and our MaskError: each names the cause
        ctx.exclude(ctx.rel(mask_path), f"the image/mask volume pair cannot be read ({exc})")
        return
    if tuple(volume.shape[:3]) != tuple(image_shape):
        ctx.exclude(ctx.rel(mask_path), f"the mask volume is {'x'.join(map(str, volume.shape[:3]))} but its image "
                                        f"is {'x'.join(map(str, image_shape))}")
        return
    regions = []
    for value in (int(v) for v in np.unique(volume) if int(v) != rules.background):
        label = rules.instance_label if rules.instances == "ids" else rules.label_of(value)
        regions.append(Region(label=label or str(value), instance=f"v{value}", mask_value=value))
    ctx.add(image, regions=regions, mask_path=mask_path, size=(int(image_shape[0]), int(image_shape[1])),
            grounded=True)
