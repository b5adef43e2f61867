"""Label masks: reading them, splitting them into regions (values, connected components, instance ids)
and rendering one region as the binary ROI mask the release ships.

Everything here is a pure function over arrays except `read_mask`, so the pipeline can apply the same
functions to a converted (resized or re-sliced) mask as the layout applies to the source mask.
"""
from __future__ import annotations

import io
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from PIL import Image

from mmbu.build.layouts.files import is_volume, read_volume_labels
from mmbu.build.layouts.sample import Region
from mmbu.core import budget
from mmbu.curation.manifest.layout import ImageMaskPairsLayout, MaskFilesLayout


class MaskError(ValueError):
    """A mask file cannot be used; the message is one readable sentence."""


class ColourMaskError(MaskError):
    """A mask whose colour channels differ: not a label mask by itself (its colours need `mask_colors`, or mark
    one object of a file that holds one)."""


def read_mask(path: Path) -> np.ndarray:
    """Label values of a mask file: (H, W) for PNG/TIFF, the raw (X, Y, Z) volume for NIfTI.

    Values are kept exactly (no windowing). An RGB mask is accepted only when its channels agree.
    """
    volume = is_volume(path)
    try:
        if volume:
            array = read_volume_labels(path)
        elif path.suffix.lower() in (".tif", ".tiff"):
            import tifffile

            with tifffile.TiffFile(path) as tiff:
                series = tiff.series[0]
                budget.check_bytes(path.name, int(np.prod(series.shape, dtype=np.int64)) * series.dtype.itemsize,
                                   f"a mask of shape {series.shape}")
                array = series.asarray()
        else:
            with Image.open(path) as image:
                budget.check_plane(path.name, *image.size, channels=len(image.getbands()), kind="mask")
                array = np.asarray(image)
    except budget.OverBudget as exc:
        raise MaskError(str(exc)) from None
    except Exception as exc:  # noqa: BLE001 - every reader raises its own types; the sentence names the file
        raise MaskError(f"{path.name}: the mask cannot be read ({exc})") from None
    array = _integral_labels(array, path)
    if volume:
        return array
    if array.ndim == 3 and array.shape[-1] in (3, 4):
        if not all(np.array_equal(array[..., 0], array[..., c]) for c in range(1, 3)):
            raise ColourMaskError(f"{path.name}: colour masks with differing channels are not label masks")
        array = array[..., 0]
    if array.ndim != 2:
        raise MaskError(f"{path.name}: expected a 2-D label mask, got shape {array.shape}")
    return array


def _integral_labels(array: np.ndarray, path: Path) -> np.ndarray:
    """Float masks (a resliced NIfTI, a scaled ``scl_slope``) as integer labels, refusing any fractional value:
    truncating 1.7 to 1 would silently move voxels between regions or drop an interpolated edge."""
    if not np.issubdtype(array.dtype, np.floating):
        return array
    labels = np.unique(array)
    fractional = labels[~np.isfinite(labels) | (labels != np.round(labels))]
    if fractional.size:
        shown = ", ".join(f"{v:g}" for v in fractional[:3]) + (" …" if fractional.size > 3 else "")
        raise MaskError(f"{path.name}: the mask holds values that are not whole label numbers ({shown}); "
                        "an interpolated or probability mask is not a label mask")
    return array.astype(np.int64)


DIRECT_LABELS = 1 << 20  # masks whose values stay at or below this label find_objects directly (no sort)


def snap_lossy_values(values: np.ndarray, background: int, declared: list[int]) -> tuple[np.ndarray, str]:
    """A JPEG label mask back to its declared values: each pixel takes the nearest one, then every class
    loses the structures thinner than three pixels (ringing along an edge between two other classes)."""
    from scipy import ndimage  # here: a no-op rebuild never loads scipy
    levels = np.array(sorted({background, *declared}), dtype=np.int32)
    nearest = levels[np.abs(values.astype(np.int32)[..., None] - levels).argmin(axis=-1)]
    cleaned = np.full_like(nearest, background)
    for value in levels:
        if value != background:
            cleaned[ndimage.binary_opening(nearest == value, structure=np.ones((3, 3), bool))] = value
    return cleaned, (f"lossy mask: each pixel snapped to the nearest of {', '.join(map(str, levels))}, "
                     "structures thinner than 3 pixels removed")


def _box(slices: tuple[slice, slice]) -> tuple[float, float, float, float]:
    rows, cols = slices
    return (float(cols.start), float(rows.start), float(cols.stop), float(rows.stop))


@dataclass(frozen=True)
class MaskRules:
    """How a label mask's values become regions: `instances` `none` (one region per value),
    `components` (each connected component of a value) or `ids` (each value one object of
    `instance_label`); `labels` maps values to raw labels, `default_label` takes the others (the
    value itself, as text, when None, so the vocabulary check reports it)."""

    labels: dict[int, str] = field(default_factory=dict)
    background: int = 0
    instances: str = "none"
    instance_label: str | None = None
    default_label: str | None = None
    min_region_pixels: int = 1

    @classmethod
    def of(cls, layout: ImageMaskPairsLayout | MaskFilesLayout, default_label: str | None = None) -> "MaskRules":
        """The rules a mask layout declares (`image_mask_pairs`, or `mask_files` with value masks)."""
        if isinstance(layout, MaskFilesLayout):
            instances = {"values": "none", "components": "components", "ids": "ids"}.get(layout.objects, "none")
            return cls(labels=layout.value_labels(), background=layout.background, instances=instances,
                       instance_label=layout.label or default_label, default_label=default_label,
                       min_region_pixels=layout.min_region_pixels)
        return cls(labels=layout.value_labels(), background=layout.background, instances=layout.instances,
                   instance_label=layout.instance_label, min_region_pixels=layout.min_region_pixels,
                   default_label=layout.instance_label if layout.object_colors else None)

    def label_of(self, value: int) -> str:
        return self.labels.get(value, self.default_label if self.default_label is not None else str(value))


def regions_from_mask(mask: np.ndarray, rules: MaskRules | ImageMaskPairsLayout, name: str = "the mask"
                      ) -> list[Region]:
    """Regions of a 2-D label mask with their pixel-edge boxes, in a stable order (by value; components of a value
    in raster order of their first pixel).

    Regions under `min_region_pixels` are dropped as specks. The work is linear in the pixels: one pass finds every
    value's box and size (`value_boxes`); components are labelled inside their value's box only. More objects than
    the budget's `max_instances` is `budget.OverBudget` naming `name` (each would be a mask row costing the image's
    pixels: a mask of 65,535 ids took past ten minutes).
    """
    from scipy import ndimage  # here: a no-op rebuild never loads scipy
    if not isinstance(rules, MaskRules):
        rules = MaskRules.of(rules)
    found = {value: box_size for value, box_size in value_boxes(mask).items() if value != rules.background}
    budget.check_instances(name, len(found))
    regions: list[Region] = []
    for value, (box, size) in found.items():
        if rules.instances == "ids":
            if size >= rules.min_region_pixels:
                regions.append(Region(label=rules.instance_label or str(value), instance=f"id-{value}",
                                      box=_box(box), mask_value=value))
            continue
        label = rules.label_of(value)
        if rules.instances == "none":
            if size >= rules.min_region_pixels:
                regions.append(Region(label=label, instance=f"v{value}", box=_box(box), mask_value=value))
            continue
        # 4-connectivity, numbered in raster order: the same inside the value's box as in the whole mask
        components, count = ndimage.label(mask[box] == value)
        budget.check_instances(name, len(regions) + count)
        sizes = np.bincount(components.ravel(), minlength=count + 1)[1:]  # pixels per component (sum_labels, faster)
        top, left = box[0].start, box[1].start
        for index, slices in enumerate(ndimage.find_objects(components), start=1):
            if slices is not None and sizes[index - 1] >= rules.min_region_pixels:
                rows, cols = slices
                regions.append(Region(label=label, instance=f"v{value}-c{index}", mask_value=value, component=index,
                                      box=_box((slice(rows.start + top, rows.stop + top),
                                                slice(cols.start + left, cols.stop + left)))))
    return regions


def value_boxes(mask: np.ndarray) -> dict[int, tuple[tuple[slice, slice], int]]:
    """Every value of an integer label mask -> (its box as slices, its pixel count), ascending, in one pass.

    Small non-negative values (the usual uint8/uint16 masks) label `find_objects` and `bincount` directly; other
    values are first made dense with `np.unique` (a sort). Value 0, which `find_objects` leaves out, is found
    with one more pass."""
    from scipy import ndimage

    labels = mask.view(np.uint8) if mask.dtype == bool else mask
    if labels.size == 0:
        return {}
    if labels.dtype.kind in "iu" and labels.min() >= 0 and labels.max() <= DIRECT_LABELS:
        values = None
    else:
        values, inverse = np.unique(labels, return_inverse=True)
        labels = inverse.reshape(mask.shape).astype(np.int32 if len(values) < 2**31 else np.int64)
    counts = np.bincount(labels.ravel())
    boxes = ndimage.find_objects(labels)
    found: dict[int, tuple[tuple[slice, slice], int]] = {}
    if counts[0]:
        zero = ndimage.find_objects((labels == 0).view(np.uint8))[0]
        found[int(values[0]) if values is not None else 0] = (zero, int(counts[0]))
    for label, box in enumerate(boxes, start=1):
        if box is not None:
            found[int(values[label]) if values is not None else label] = (box, int(counts[label]))
    return found


def region_mask(mask: np.ndarray, region: Region, components: dict[int, np.ndarray] | None = None) -> np.ndarray:
    """Boolean (H, W) mask of one region of the label mask it was found in. `components`, when given, keeps
    the connected components of each value of this `mask` for the next region of the same mask."""
    from scipy import ndimage  # here: a no-op rebuild never loads scipy
    if region.component is None:
        return mask == region.mask_value
    if components is None:
        return ndimage.label(mask == region.mask_value)[0] == region.component
    if region.mask_value not in components:
        components[region.mask_value] = ndimage.label(mask == region.mask_value)[0]
    return components[region.mask_value] == region.component


def mask_box(mask: np.ndarray) -> tuple[int, int, int, int] | None:
    """Pixel-edge box of a boolean mask, None when empty (e.g. a speck lost in downscaling).

    After a mask is resized, take the mask-grounded row's box from the resized mask, so the two
    agree exactly; a separately scaled box can differ by a resampling pixel.
    """
    from scipy import ndimage  # here: a no-op rebuild never loads scipy
    found = ndimage.find_objects(mask.astype(np.uint8))
    if not found or found[0] is None:
        return None
    x1, y1, x2, y2 = _box(found[0])
    return int(x1), int(y1), int(x2), int(y2)


def mask_png(mask: np.ndarray) -> bytes:
    """A boolean mask as an 8-bit PNG (0 outside, 255 inside) - the release's `mask` image."""
    buffer = io.BytesIO()
    Image.fromarray(np.where(mask, 255, 0).astype(np.uint8), mode="L").save(buffer, format="PNG")
    return buffer.getvalue()
