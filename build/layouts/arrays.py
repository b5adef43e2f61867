"""NumPy image stacks (MedMNIST `.npz`, PanNuke `.npy`): one sample per first-axis index.

Images and assembled masks are written once into the layout cache (see `derived`); the arrays are
read one item at a time (see `array_files`). A group is one match of the `images` template (one file,
or one `.npz` member such as `train_images`); its labels, masks and metadata arrays are found by
filling their templates with the same named parts.
"""
from __future__ import annotations

import glob
import re
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mmbu.build.layouts.array_files import ArrayFileError, ItemArray, npz_members, open_array
from mmbu.build.layouts.context import LayoutContext
from mmbu.build.layouts.files import glob_files
from mmbu.build.layouts.instances import InstanceCanvas
from mmbu.build.layouts.masks import MaskRules, regions_from_mask
from mmbu.build.layouts.sample import Region
from mmbu.build.layouts.single_label import one_label
from mmbu.build.layouts.splits import keep_splits
from mmbu.core import budget
from mmbu.curation.manifest.hints import did_you_mean
from mmbu.curation.manifest.layout_arrays import ArrayRef, ArraysLayout
from mmbu.curation.manifest.model import ConvertSpec
from mmbu.curation.manifest.templates import PathTemplate

MASK_SLAB = 16  # mask slices read at a time when looking for the largest mask area


@dataclass(frozen=True)
class _Group:
    parts: dict[str, str]
    path: Path
    key: str | None

    def where(self, ctx: LayoutContext) -> str:
        return ctx.rel(self.path) + (f":{self.key}" if self.key else "")


def read(layout: ArraysLayout, ctx: LayoutContext) -> None:
    if layout.items == "file":
        from mmbu.build.layouts.array_images import read_files  # imported here: it builds on this module

        read_files(layout, ctx)
        return
    groups = list(_image_groups(layout.images, ctx))
    if not groups:
        ctx.exclude(layout.images.file, f"no array matches images {layout.images.file!r}"
                                        + (f" key {layout.images.key!r}" if layout.images.key else ""))
    for group in keep_splits(ctx, layout.splits, layout.images.file, "arrays", groups, lambda g: g.parts):
        with ExitStack() as stack:
            _read_group(layout, ctx, group, stack)


def _image_groups(ref: ArrayRef, ctx: LayoutContext) -> Iterator[_Group]:
    template = PathTemplate(ref.file)
    for path, parts in template.scan(ctx.raw_dir):
        if ref.key is None:
            yield _Group(parts, path, None)
            continue
        try:
            members = npz_members(path)
        except ArrayFileError as exc:
            ctx.exclude(ctx.rel(path), str(exc))
            continue
        key_template = PathTemplate(ref.key)
        matched = False
        for member in sorted(members):
            key_parts = key_template.match(member)
            if key_parts is not None and all(parts.get(k, v) == v for k, v in key_parts.items()):
                matched = True
                yield _Group({**parts, **key_parts}, path, member)
        if not matched:
            ctx.exclude(ctx.rel(path), f"no array in it matches key {ref.key!r}{did_you_mean(ref.key, members)}")


def filled_path(ctx: LayoutContext, template: str, parts: dict[str, str]) -> Path:
    """The file `template` names with `parts` filled in. A glob the template keeps outside its parts (a leading
    `**/` or `*/` for an archive's unknown top folder) is looked up among the fetched files: one match is the file,
    several are ambiguous (ArrayFileError), none leaves the path as written, which the caller reports missing."""
    if not re.search(r"[*?[]", re.sub(r"\{[^}]*\}", "", template)):
        return ctx.path(PathTemplate(template).fill(parts))
    pattern = PathTemplate(template).fill({name: glob.escape(value) for name, value in parts.items()})
    found = glob_files(ctx.raw_dir, pattern)
    if len(found) > 1:
        raise ArrayFileError(f"{pattern!r} matches {len(found)} files ({', '.join(ctx.rel(p) for p in found[:3])}); "
                             "which one belongs to this item is ambiguous")
    return found[0] if found else ctx.path(PathTemplate(template).fill(parts))


def open_ref(ctx: LayoutContext, ref: ArrayRef, parts: dict[str, str], stack: ExitStack
             ) -> tuple[ItemArray, str]:
    path = filled_path(ctx, ref.file, parts)
    key = PathTemplate(ref.key).fill(parts) if ref.key else None
    where = ctx.rel(path) + (f":{key}" if key else "")
    if not path.is_file():
        raise ArrayFileError(f"{where} is not in the fetched files")
    if key is not None and key not in npz_members(path):
        raise ArrayFileError(f"{ctx.rel(path)} has no array {key!r}{did_you_mean(key, npz_members(path))}")
    array = open_array(path, key)
    stack.callback(array.close)
    return array, where


def _read_group(layout: ArraysLayout, ctx: LayoutContext, group: _Group, stack: ExitStack) -> None:
    where = group.where(ctx)
    try:
        images = open_array(group.path, group.key)
        stack.callback(images.close)
        labels = open_ref(ctx, layout.labels, group.parts, stack) if layout.labels else None
        masks = open_ref(ctx, layout.masks, group.parts, stack) if layout.masks else None
        metadata = {field: open_ref(ctx, ref, group.parts, stack) for field, ref in layout.metadata.items()}
    except ArrayFileError as exc:
        ctx.exclude(where, str(exc))
        return
    axes = _axes(layout.axes, images)
    if axes is None:
        ctx.exclude(where, f"images of shape {images.shape} are not a stack of 2-D images; set layout.axes "
                           "(NHW, NHWC, NCHW, NDHW or NDHWC)")
        return
    problem = _check_shapes(layout, images, axes, labels, masks, metadata)
    if problem:
        ctx.exclude(where, problem)
        return
    notes = {"images": f"{where} ({images.access})"}
    if masks:
        notes["masks"] = f"{masks[1]} ({masks[0].access})"
    covered = _annotated_range(layout, len(images), labels, masks)
    if len(covered) < len(images):
        ctx.exclude(where, f"items {_ranges(sorted(set(range(len(images))) - set(covered)))} have no "
                           f"{'labels' if labels else 'mask'}: {_start_text(layout, labels, masks)}")
    for index in covered:
        part = f"key={group.key};index={index}" if group.key else f"index={index}"
        item = f"{ctx.rel(group.path)}#{part}"  # as add_derived names its exclusions
        label = None
        if labels:
            label, reason = item_label(layout, labels[0].item(index - (_start(layout, "labels") or 0)))
            if reason:
                ctx.exclude(item, reason)
                continue
        regions: list[Region] = []
        mask = None
        # read once: a streamed member cannot go back cheaply
        mask_item = masks[0].item(index - (_start(layout, "masks") or 0)) if masks else None
        depth = _depth(ctx, images, axes, mask_item if "D" in axes else None)
        if mask_item is not None:
            mask, regions, problems = item_regions(layout, mask_item, depth, item)
            for instance, reason in problems:
                ctx.exclude(f"{item}#{instance}", reason)
        row_metadata = {field: text for field, (array, _) in metadata.items()
                        if (text := _text(np.asarray(array.item(index)).reshape(-1)[0]))}
        slice_note = {"slice": f"depth index {depth} of {images.shape[1]}"} if depth is not None else {}
        ctx.add_derived(group.path, part, lambda i=index, d=depth: _image_item(images, axes, i, d), label=label,
                        regions=regions, mask=mask, row_metadata=row_metadata, grounded=labels is None,
                        provenance={**notes, **slice_note, "index": str(index)})


def _start(layout: ArraysLayout, name: str) -> int | None:
    """`start` of the labels or masks reference (None for the others and when not given)."""
    ref = {"labels": layout.labels, "masks": layout.masks}.get(name)
    return ref.start if ref is not None else None


def _annotated_range(layout: ArraysLayout, count: int, labels: tuple[ItemArray, str] | None,
                     masks: tuple[ItemArray, str] | None) -> range:
    """The images items that every given labels or masks array covers (all of them without `start`)."""
    first, stop = 0, count
    for name, found in (("labels", labels), ("masks", masks)):
        if found is not None and (start := _start(layout, name)) is not None:
            first, stop = max(first, start), min(stop, start + len(found[0]))
    return range(first, max(first, stop))


def _start_text(layout: ArraysLayout, labels: tuple[ItemArray, str] | None,
                masks: tuple[ItemArray, str] | None) -> str:
    spans = [f"{where} covers items {start}-{start + len(array) - 1}"
             for name, found in (("labels", labels), ("masks", masks)) if found is not None
             for (array, where), start in [(found, _start(layout, name) or 0)]]
    return "; ".join(spans)


def _ranges(indices: list[int]) -> str:
    """0, 1, 2, 5, 7, 8 as '0-2, 5, 7-8'."""
    spans: list[list[int]] = []
    for index in indices:
        if spans and index == spans[-1][1] + 1:
            spans[-1][1] = index
        else:
            spans.append([index, index])
    return ", ".join(f"{a}-{b}" if a != b else str(a) for a, b in spans)


def _axes(given: str, images: ItemArray) -> str | None:
    ndim = len(images.shape)
    if given != "auto":
        return given if len(given) == ndim else None
    if ndim == 3:
        return "NHW"
    if ndim == 4 and images.shape[-1] in (1, 3, 4):
        return "NHWC"
    return None


def _check_shapes(layout: ArraysLayout, images: ItemArray, axes: str, labels: tuple[ItemArray, str] | None,
                  masks: tuple[ItemArray, str] | None, metadata: dict[str, tuple[ItemArray, str]]) -> str | None:
    count = len(images)
    for name, found in (("labels", labels), ("masks", masks), *metadata.items()):
        start = _start(layout, name)
        if found is None:
            continue
        if start is None and len(found[0]) != count:
            return f"the images hold {count} items but {name} ({found[1]}) holds {len(found[0])}"
        if start is not None and start + len(found[0]) > count:
            return (f"{name} ({found[1]}) holds {len(found[0])} items from images item {start} on, past the "
                    f"images' {count} items")
    if masks is None:
        return None
    shape = dict(zip(axes, images.shape))
    mask_shape = masks[0].shape
    expected = tuple(shape[a] for a in axes if a in "DHW")
    got = mask_shape[1:len(expected) + 1]
    if got != expected:
        return f"the masks ({masks[1]}) are {'x'.join(map(str, got))} per item but the images are " \
               f"{'x'.join(map(str, expected))}"
    extra = mask_shape[len(expected) + 1:]
    if layout.instance_classes:
        if extra != (2,):
            return f"the masks ({masks[1]}) need two channels (instance ids, class map) for instance_classes"
    elif layout.mask_channels:
        if extra != (len(layout.mask_channels),):
            return (f"the masks ({masks[1]}) have {extra[0] if extra else 'no'} channel(s) but mask_channels names "
                    f"{len(layout.mask_channels)}")
    elif extra:
        return f"the masks ({masks[1]}) have channels {extra}; name them with mask_channels"
    return None


def item_label(layout: ArraysLayout, value: np.ndarray) -> tuple[str | None, str | None]:
    """The raw label of one item's label entry, or the reason it has none."""
    value = np.asarray(value)
    if value.dtype.kind in "US":
        return _text(value.reshape(-1)[0]), None
    flat = value.reshape(-1)
    if flat.size == 1:
        number = flat[0]
        if value.dtype.kind == "f" and not float(number).is_integer():
            return None, f"label value {float(number)!r} is not a class index"
        index = int(number)
        if layout.class_names is None:
            return str(index), None
        if not 0 <= index < len(layout.class_names):
            return None, f"label index {index} is outside class_names (0..{len(layout.class_names) - 1})"
        return layout.class_names[index], None
    if layout.class_names is None or len(layout.class_names) != flat.size:
        return None, (f"a multi-hot label row of {flat.size} values needs class_names with {flat.size} names")
    return one_label([name for name, on in zip(layout.class_names, flat) if on], layout.no_finding)


def _depth(ctx: LayoutContext, images: ItemArray, axes: str, mask_volume: np.ndarray | None) -> int | None:
    """The slice of a volume item the manifest picks (see `pick_depth`)."""
    if "D" not in axes:
        return None
    return pick_depth(ctx.manifest.convert, images.shape[1], mask_volume)[0]


def pick_depth(spec: ConvertSpec, depth: int, mask: ItemArray | np.ndarray | None) -> tuple[int, str]:
    """The slice of a volume `depth` slices deep, and how it was chosen: `convert.slice` (`mask_max_area`:
    the slice where `mask` has the most non-zero voxels, the first on ties, read a slab at a time; or an
    index), else `convert.z` (an index), else the middle. Indices past the end are held at the last slice."""
    if spec.slice == "mask_max_area" and mask is not None:
        areas = np.zeros(depth, dtype=np.int64)
        plane = int(np.prod(mask.shape[1:], dtype=np.int64)) * mask.dtype.itemsize
        step = budget.planes_within(plane, MASK_SLAB)
        for start in range(0, depth, step):
            slab = mask.items(start, start + step) if isinstance(mask, ItemArray) else mask[start:start + step]
            areas[start:start + len(slab)] = (np.asarray(slab).reshape(len(slab), -1) != 0).sum(axis=1)
        if areas.any():
            return int(areas.argmax()), "mask_max_area"
        return depth // 2, "middle (the mask is empty)"
    for choice, how in ((spec.slice, "convert.slice"), (spec.z, "convert.z")):
        if isinstance(choice, int) and not isinstance(choice, bool):
            return min(max(choice, 0), depth - 1), how
    return depth // 2, "middle"


def _image_item(images: ItemArray, axes: str, index: int, depth: int | None) -> np.ndarray:
    item = images.item(index)
    if "D" in axes:
        item = item[depth]
    if axes == "NCHW":
        item = np.moveaxis(item, 0, -1)
    return item


def item_regions(layout: ArraysLayout, mask: np.ndarray, depth: int | None, name: str = "the mask"
                 ) -> tuple[np.ndarray, list[Region], list[tuple[str, str]]]:
    """One item's label mask (instance ids or values), its regions, and the objects it had to drop. An item over
    the budget (`max_instances`, or a canvas over its pixels) gives no region and one problem saying so."""
    try:
        return _item_regions(layout, mask, depth, name)
    except budget.OverBudget as exc:
        return mask, [], [("mask", str(exc))]


def _item_regions(layout: ArraysLayout, mask: np.ndarray, depth: int | None, name: str
                  ) -> tuple[np.ndarray, list[Region], list[tuple[str, str]]]:
    from scipy import ndimage  # here: a no-op rebuild never loads scipy
    if depth is not None:
        mask = mask[depth]
    if layout.instance_classes:
        return _classed_instances(layout, mask[..., 0], mask[..., 1], name)
    if layout.mask_channels:
        canvas = InstanceCanvas(height=mask.shape[0], width=mask.shape[1], name=name)
        for channel, label in enumerate(layout.mask_channels):
            if label is None:
                continue  # PanNuke's last channel: background
            plane = mask[..., channel]
            if layout.instances == "components":  # a binary channel: each connected piece is one object
                pieces, _ = ndimage.label(plane != layout.background)
                canvas.paint_plane(pieces, 0, lambda index, c=channel, l=label: (l, f"c{c}-c{index}"))
                continue
            canvas.paint_plane(plane, layout.background, lambda value, c=channel, l=label: (l, f"c{c}-id{_number(value)}"))
        regions, problems = canvas.regions(layout.min_region_pixels)
        return canvas.ids, regions, problems
    values = mask
    if values.dtype.kind == "f":
        if not (np.isfinite(values).all() and (values == np.rint(values)).all()):
            return values, [], [("mask", "the mask holds fractional values, not labels")]
        values = values.astype(np.int64)
    rules = MaskRules(labels=dict(layout.mask_values), background=layout.background, instances=layout.instances,
                      instance_label=layout.instance_label, min_region_pixels=layout.min_region_pixels)
    return values, regions_from_mask(values, rules, name), []


def _classed_instances(layout: ArraysLayout, ids: np.ndarray, classes: np.ndarray, name: str
                       ) -> tuple[np.ndarray, list[Region], list[tuple[str, str]]]:
    """Objects of an instance-id plane, each labelled by the class value most of its pixels hold in the class
    plane (ties go to the smaller value); an object with no class pixel is dropped with a reason. One sort of the
    (id, class) pairs of the object pixels, whatever the number of objects."""
    canvas = InstanceCanvas(height=ids.shape[0], width=ids.shape[1], name=name)
    inside = ids != layout.background
    pairs, counts = np.unique(np.stack([ids[inside], classes[inside]]), axis=1, return_counts=True)
    majority: dict[int, object] = {}
    best: dict[int, int] = {}
    for (value, found), count in zip(pairs.T.tolist(), counts.tolist()):  # classes ascend within an id: ties stay
        if found != layout.background and count > best.get(value, 0):
            majority[value], best[value] = found, count
    problems = [(f"id{_number(value)}", "the object has no class in the class channel")
                for value in dict.fromkeys(pairs[0].tolist()) if value not in majority]
    canvas.paint_plane(ids, layout.background, lambda value: None if value not in majority else
                       (layout.instance_classes.get(int(majority[value]), _number(majority[value])),
                        f"id{_number(value)}"))
    regions, dropped = canvas.regions(layout.min_region_pixels)
    return canvas.ids, regions, problems + dropped


def _number(value: object) -> str:
    number = float(value)
    return str(int(number)) if number.is_integer() else str(number)


def _text(value: object) -> str:
    """An array cell as text: byte strings (dtype S) decoded, not shown as b'...'."""
    return (value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)).strip()
