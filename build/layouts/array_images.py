"""`arrays` with `items: file`: one image per file, an `.npy`/`.npz` array or a picture with an array mask,
or one slice of a volume per file (`axes: DHW`, e.g. HDF5 datasets named by key).

LyNSeC keeps each image and its nucleus instance ids in one (H, W, 4) `.npy` (channels 0-2 and 3);
IHC-TMA keeps PNG images beside channels-first `.npy` masks. The image array (its chosen channels) is
written once into the layout cache like a stack item, with the file (and the channels) as its sample
id; a picture file stays the sample itself and only its mask goes to the cache. Each file is small, so
it is read whole; an `.npz` member and an object array get the same care as in a stack. `labels` gives a
file its class instead of (or besides) a mask: FairVision keeps each patient's SLO photo `slo_<id>.jpg`
beside `data_<id>.npz`, whose one-value member `glaucoma` (or `amd_condition`, `dr_subtype`) is the class.
"""
from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path

import numpy as np

from mmbu.build.layouts.array_files import ArrayFileError, open_array, read_value
from mmbu.build.layouts.arrays import filled_path, item_label, item_regions, open_ref, pick_depth
from mmbu.build.layouts.context import LayoutContext
from mmbu.build.layouts.files import image_size
from mmbu.build.layouts.splits import keep_splits
from mmbu.curation.manifest.layout_arrays import ARRAY_SUFFIXES, ArrayRef, ArraysLayout
from mmbu.curation.manifest.templates import PathTemplate


def read_files(layout: ArraysLayout, ctx: LayoutContext) -> None:
    found = list(PathTemplate(layout.images.file).scan(ctx.raw_dir))
    if not found:
        ctx.exclude(layout.images.file, f"no file matches images {layout.images.file!r}")
    for path, parts in keep_splits(ctx, layout.splits, layout.images.file, "arrays", found, lambda item: item[1]):
        with ExitStack() as stack:
            _read_file(layout, ctx, path, parts, stack)


def _read_file(layout: ArraysLayout, ctx: LayoutContext, path: Path, parts: dict[str, str], stack: ExitStack) -> None:
    where = ctx.rel(path)
    if layout.axes == "DHW":
        _read_volume_file(layout, ctx, path, parts, stack)
        return
    try:
        image = _image(layout, path, parts) if path.name.lower().endswith(ARRAY_SUFFIXES) else None
    except ArrayFileError as exc:
        ctx.exclude(where, str(exc))
        return
    label, labels_note = None, {}
    if layout.labels is not None:
        key = PathTemplate(layout.labels.key).fill(parts) if layout.labels.key else None
        label_file = filled_path(ctx, layout.labels.file, parts)
        label_where = ctx.rel(label_file) + (f":{key}" if key else "")
        try:
            label, reason = _file_label(layout, ctx, parts, label_file, key)
        except ArrayFileError as exc:
            reason = str(exc)
        if reason:
            ctx.exclude(label_where, reason)
            return
        labels_note = {"labels": label_where}
    if layout.masks is None:  # a class per file: the picture, or the image array in the cache, is the sample
        if image is not None:
            ctx.add_derived(path, _part(layout.images), lambda: image, label=label,
                            provenance={"images": _images_note(layout, where), **labels_note})
        else:
            ctx.add(path, label=label, provenance=labels_note)
        return
    try:
        masks, mask_where = open_ref(ctx, layout.masks, parts, stack)
    except ArrayFileError as exc:
        ctx.exclude(where, str(exc))
        return
    try:
        mask = _mask(layout, masks.whole())
    except ArrayFileError as exc:
        ctx.exclude(mask_where, str(exc))
        return
    size = (image.shape[1], image.shape[0]) if image is not None else image_size(path)
    if size is None:
        ctx.exclude(where, "the image size cannot be read, so its mask cannot be checked against it")
        return
    if (mask.shape[1], mask.shape[0]) != size:
        ctx.exclude(mask_where, f"the mask is {mask.shape[1]}x{mask.shape[0]} but its image is {size[0]}x{size[1]}")
        return
    ids, regions, problems = item_regions(layout, mask, None, mask_where)
    for instance, reason in problems:
        ctx.exclude(f"{where}#{instance}", reason)
    notes = {"masks": f"{mask_where} ({masks.access})", **labels_note}
    grounded = label is None  # with a class of its own the image stays a sample without its objects
    if image is not None:
        ctx.add_derived(path, _part(layout.images), lambda: image, label=label, regions=regions, mask=ids,
                        grounded=grounded, provenance={"images": _images_note(layout, where), **notes})
    elif not regions and grounded:
        ctx.exclude(where, "no annotated object with a known label is left in this image")
    else:  # a picture: the file is the sample; the mask made from the array goes to the layout cache
        mask_file = filled_path(ctx, layout.masks.file, parts)
        ctx.add(path, label=label, regions=regions, mask_path=ctx.store_mask(path, ids, [mask_file]), size=size,
                grounded=grounded, provenance=notes)


def _images_note(layout: ArraysLayout, where: str) -> str:
    return where + (f" channels {layout.images.channels}" if layout.images.channels else "")


def _file_label(layout: ArraysLayout, ctx: LayoutContext, parts: dict[str, str], label_file: Path,
                key: str | None) -> tuple[str | None, str | None]:
    """The raw label of one file's sample from its `labels` array (`label_file`, member `key`: a single value, or a
    multi-hot row), or the reason it has none."""
    with ExitStack() as stack:  # open_ref names a missing file or member; the value itself is read whole
        open_ref(ctx, layout.labels, parts, stack)
    return item_label(layout, read_value(label_file, key))


def _read_volume_file(layout: ArraysLayout, ctx: LayoutContext, path: Path, parts: dict[str, str],
                      stack: ExitStack) -> None:
    """`axes: DHW`: one volume per file (an HDF5 dataset); only the chosen slice of image and mask is read."""
    try:
        images, where = open_ref(ctx, layout.images, parts, stack)
        masks, mask_where = open_ref(ctx, layout.masks, parts, stack)
    except ArrayFileError as exc:
        ctx.exclude(ctx.rel(path), str(exc))
        return
    if len(images.shape) != 3:
        ctx.exclude(where, f"the image array has shape {images.shape}; axes DHW needs one (depth, height, width) volume")
        return
    if masks.shape != images.shape:
        ctx.exclude(mask_where, f"the mask volume is {'x'.join(map(str, masks.shape))} but its image is "
                                f"{'x'.join(map(str, images.shape))}")
        return
    try:
        depth, how = pick_depth(ctx.manifest.convert, images.shape[0], masks)
        image, mask = images.item(depth), masks.item(depth)  # one slice each, a damaged chunk named here
    except ArrayFileError as exc:
        ctx.exclude(where, str(exc))
        return
    ids, regions, problems = item_regions(layout, mask, None, mask_where)
    for instance, reason in problems:
        ctx.exclude(f"{where}#{instance}", reason)
    ctx.add_derived(path, f"{_part(layout.images)};z={depth}", lambda: image, regions=regions, mask=ids, grounded=True,
                    provenance={"images": f"{where} ({images.access})", "masks": f"{mask_where} ({masks.access})",
                                "slice": f"z {depth} of {images.shape[0]} ({how})"})


def _part(ref: ArrayRef) -> str:
    """Part of the sample id: the member and the channels read make the image, so they name it."""
    part = f"key={ref.key}" if ref.key else "file"
    return part + (f";channels={','.join(map(str, ref.channels))}" if ref.channels else "")


def _image(layout: ArraysLayout, path: Path, parts: dict[str, str]) -> np.ndarray:
    array = open_array(path, PathTemplate(layout.images.key).fill(parts) if layout.images.key else None)
    try:
        item = array.whole()
    finally:
        array.close()
    axes = layout.axes if layout.axes != "auto" else {2: "HW", 3: "HWC"}.get(item.ndim, "")
    if len(axes) != item.ndim:
        raise ArrayFileError(f"an image array of shape {tuple(item.shape)} does not have the axes "
                             f"{axes or 'HW or HWC'}; set layout.axes")
    item = _channels(item, layout.images.channels, first=axes == "CHW", what="images")
    if axes == "CHW":
        item = np.moveaxis(item, 0, -1)
    return item[..., 0] if item.ndim == 3 and item.shape[-1] == 1 else item


def _mask(layout: ArraysLayout, item: np.ndarray) -> np.ndarray:
    first = layout.mask_axes == "CHW"
    if first and item.ndim != 3:
        raise ArrayFileError(f"a channels-first mask needs three axes; this one has shape {tuple(item.shape)}")
    item = _channels(item, layout.masks.channels, first=first, what="masks")
    if first:
        item = np.moveaxis(item, 0, -1)
    if layout.instance_classes:
        if item.ndim != 3 or item.shape[-1] != 2:
            raise ArrayFileError(f"instance_classes needs two mask channels (instance ids, class map); the mask has "
                                 f"shape {tuple(item.shape)}")
        return item
    if layout.mask_channels:
        if item.ndim == 2:
            item = item[..., None]
        if item.ndim != 3 or item.shape[-1] != len(layout.mask_channels):
            raise ArrayFileError(f"the mask has {item.shape[-1] if item.ndim == 3 else 'no'} channel(s) but "
                                 f"mask_channels names {len(layout.mask_channels)}")
        return item
    if item.ndim == 3 and item.shape[-1] == 1:
        item = item[..., 0]
    if item.ndim != 2:
        raise ArrayFileError(f"the mask has shape {tuple(item.shape)}; name its channels with mask_channels or pick "
                             "one with masks.channels")
    return item


def _channels(item: np.ndarray, channels: list[int] | None, *, first: bool, what: str) -> np.ndarray:
    if channels is None:
        return item
    if item.ndim != 3:
        raise ArrayFileError(f"{what}: channels need an array with channels; this one has shape {tuple(item.shape)}")
    count = item.shape[0 if first else -1]
    if outside := [c for c in channels if c >= count]:
        raise ArrayFileError(f"{what}: channel {outside[0]} is outside the {count} channels of an item of shape "
                             f"{tuple(item.shape)}")
    return item[channels] if first else item[..., channels]
