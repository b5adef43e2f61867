"""NIfTI-1/-2 volumes (.nii, .nii.gz) to one 8-bit slice in radiological display.

What a caller can rely on:

* **Canonical frame.** The volume is treated as if reoriented to RAS+ with nibabel's
  `io_orientation` (the same transform `as_closest_canonical` applies; oblique affines are *not*
  resampled, the closest cardinal axes are used and `oblique_degrees` is recorded). Only the one
  slice that is shown is read from `img.dataobj` (with `indexed_gzip`, also for .nii.gz), never
  the whole volume.
* **Which slice.** `options.axis` is the canonical axis (0 sagittal, 1 coronal, 2 axial);
  `options.slice` is `"middle"` (index n // 2), a canonical index, or `"mask_max_area"` (the slice
  where `options.slice_mask` — or, when converting a mask, the mask itself — has the most non-zero
  voxels; the first such slice on ties).
* **4-D.** `options.frame` picks the volume: `"middle"` (T // 2, the same rule as DICOM
  multi-frame) or an index.
* **Radiological display.** For every axis the 2-D slice (its two remaining canonical axes in
  increasing order, e.g. (x, y) for axial) is shown transposed and flipped in both directions:
  axial — patient's right on the image's left, anterior up; coronal — patient's right on the
  image's left, superior up; sagittal — anterior on the image's left, superior up.
  Non-square voxels (thick slices seen from the side) are stretched along the coarser display axis
  to square pixels (`square_pixels_from` records the size before; `pixel_spacing_mm` the spacing);
  `options.square_pixels` False keeps the stored grid (`square_pixels` records that it was off).
* **RGB voxels** (NIfTI RGB24/RGBA32 data types) stay colour, unwindowed (alpha dropped).
* **RGB vectors**: colour stored as components on the 5th dimension (X, Y, Z, 1, 3 — ITK and
  SimpleITK), or on the 4th with a vector / RGB-vector intent ((X, Y, 1, 3) for 2-D images), is
  shown as RGB: each component goes through the same slice and orientation; 8-bit kept, deeper
  data scaled by one window over the three components (`rgb_components` records the layout).
* **Intensities.** A percentile window (0.5–99.5) over the slice's finite non-zero voxels, or
  `options.window` (center, width); NaN → black, ±Inf clipped, a constant slice → black.
  With `options.as_mask` the values are kept as labels and never windowed; resizing is nearest.
  An image and its mask converted with the same options go through the identical geometric
  transform, so they align pixel for pixel.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import nibabel as nib
import numpy as np
from nibabel.affines import obliquity
from nibabel.orientations import aff2axcodes, apply_orientation, io_orientation
from PIL import Image

from mmbu.build.convert import display
from mmbu.build.convert.base import (
    SQUARE_PIXELS_OFF_NOTE,
    ConversionError,
    Converted,
    ConvertOptions,
    exception_summary as _cause,
)
from mmbu.core import budget
from mmbu.core.geometry import ConversionGeometry

AXIS_NAMES = ("sagittal", "coronal", "axial")
# mask slabs read at a time when searching the slice with the largest mask area (bounded memory)
MASK_SCAN_SLAB = 16
# a display axis is stretched at most this much to make pixels square (guards absurd headers)
MAX_ASPECT_STRETCH = 16
# components of a colour vector (RGB, RGBA) and the intents that mark the 4th dimension as one
RGB_COMPONENTS = (3, 4)
VECTOR_INTENTS = ("vector", "rgb vector", "rgba vector")
# contiguous bytes read at a time when gathering a slice across the stored z axis
SLAB_BYTES = 4 * 2**20


def read(path: Path, options: ConvertOptions) -> Converted:
    """Convert one slice of a NIfTI volume (or, with `options.as_mask`, of a label volume)."""
    path = Path(path)
    image = _load(path)
    ornt = canonical_orientation(image.affine, path)
    shape = image.shape
    spatial_shape = _spatial_shape(shape)
    canonical_axis = check_axis(options.axis, path)
    original_axis = int(np.nonzero(ornt[:, 0] == canonical_axis)[0][0])
    flipped = ornt[original_axis, 1] == -1
    n_slices = spatial_shape[original_axis]

    component_axis = rgb_component_axis(image)
    volume_shape = shape[:3] if component_axis == 3 else shape[:4] if component_axis == 4 else shape
    volume_index, n_volumes = pick_volume(volume_shape, options.frame, path)
    canonical_index, choice = _slice_index(path, image, ornt, options, canonical_axis, n_slices, volume_index)
    original_index = n_slices - 1 - canonical_index if flipped else canonical_index

    def view_of(volume: int | None, component: int = 0) -> np.ndarray:
        plane = _read_canonical_slice(image, ornt, original_axis, original_index, volume, spatial_shape, component)
        return radiological_view(plane)

    if component_axis is None:
        view = view_of(volume_index)
    else:  # one slice per colour component (alpha dropped), each through the same transform
        views = [view_of(c, 0) if component_axis == 3 else view_of(volume_index, c) for c in range(3)]
        view = np.stack(views, axis=-1)

    params: dict[str, Any] = {
        "nifti_version": 2 if isinstance(image, nib.Nifti2Image) else 1,
        "shape": [int(n) for n in shape],
        **slice_params(image.affine, ornt, image.header.get_zooms(), canonical_axis, choice,
                       (canonical_index, original_index), volume_index, n_volumes),
        "rgb_components": None,
    }
    if component_axis is not None:  # 2-D/3-D RGB stored as a vector of components (ITK, SimpleITK, ...)
        if options.as_mask:
            raise ConversionError(f"{path} holds RGB vectors (dimension {component_axis + 1}), so it is not a label mask")
        params["rgb_components"] = {
            "dimension": component_axis + 1,
            "count": int(shape[component_axis]),
            "intent": image.header.get_intent()[0],
        }
        pixels, params["window"] = window_rgb(view, options.window)
    elif view.dtype.names:  # RGB24 / RGBA32 voxels: colour as stored, never windowed
        if options.as_mask:
            raise ConversionError(f"{path} holds RGB voxels, so it is not a label mask")
        pixels = np.stack([view[name] for name in view.dtype.names[:3]], axis=-1).astype(np.uint8)
        params["window"] = {"source": "RGB voxels kept"}
    elif options.as_mask:
        pixels = display.to_label_image(view)
        params["window"] = None
    else:
        pixels, params["window"] = window_slice(view, options.window)
    # the stored frame of a volume is the slice as shown (canonical RAS, radiological view): a volume's
    # regions are read from its mask converted the same way, never mapped from voxel coordinates
    geometry = ConversionGeometry.kept((pixels.shape[1], pixels.shape[0]))
    resample = "nearest" if options.as_mask else "lanczos"
    if options.square_pixels:
        pixels, params["square_pixels_from"] = square_pixels(pixels, params["pixel_spacing_mm"], options.as_mask)
        geometry = geometry.then("square_pixels", (pixels.shape[1], pixels.shape[0]), how=resample)
    else:  # the stored voxel grid, e.g. for 2-D images saved as NIfTI with meaningless pixdim
        params["square_pixels_from"] = None
        params["square_pixels"] = {"applied": False, "note": SQUARE_PIXELS_OFF_NOTE}
    pixels = display.resize_longest_side(pixels, options.max_size, is_mask=options.as_mask)
    params["resized_to"] = [int(pixels.shape[1]), int(pixels.shape[0])]
    geometry = geometry.then("resize", (pixels.shape[1], pixels.shape[0]), how=resample)
    return Converted(pixels=pixels, format="nifti", frame=volume_index, params=params, geometry=geometry)


def slice_params(affine: np.ndarray, ornt: np.ndarray, zooms: tuple[float, ...], canonical_axis: int, choice: str,
                 indices: tuple[int, int], volume_index: int | None, n_volumes: int) -> dict[str, Any]:
    """What the slice choice and the reorientation did, for the report (NIfTI, MetaImage, NRRD alike).
    `indices` is the slice's (canonical, stored) index."""
    original_axis = int(np.nonzero(ornt[:, 0] == canonical_axis)[0][0])
    return {
        "axcodes_before": "".join(aff2axcodes(affine)),
        "axcodes_after": "RAS",
        "oblique_degrees": round(float(np.degrees(np.max(np.abs(obliquity(affine))))), 3),
        "axis": canonical_axis,
        "axis_name": AXIS_NAMES[canonical_axis],
        "slice_choice": choice,
        "slice_index": indices[0],
        "slice_index_original": indices[1],
        "axis_original": original_axis,
        "volume_index": volume_index,
        "n_volumes": n_volumes,
        "display": "radiological",
        "pixel_spacing_mm": display_spacing(zooms, ornt, canonical_axis),
    }


def radiological_view(plane: np.ndarray) -> np.ndarray:
    """A canonical (RAS+) slice with its two axes in increasing order, as a radiologist sees it.

    Rows run from the higher to the lower value of the second axis (anterior or superior up);
    columns from the higher to the lower value of the first (patient's right, or anterior, on the
    image's left). Pure indexing, so image and mask get exactly the same transform.
    """
    return np.ascontiguousarray(plane.T[::-1, ::-1])


def square_pixels(pixels: np.ndarray, spacing: list[float], is_mask: bool) -> tuple[np.ndarray, list[int] | None]:
    """Stretch the coarser display axis so a pixel is as tall as it is wide (thick slices in coronal or
    sagittal views would otherwise look squashed). LANCZOS for images, NEAREST for masks: the same
    output grid, so an image and its mask stay aligned. Returns the pixels and the size before, or
    None when the voxels were already square (within 1 %).
    """
    row_mm, column_mm = spacing
    if row_mm <= 0 or column_mm <= 0 or abs(row_mm / column_mm - 1) <= 0.01:
        return pixels, None
    height, width = pixels.shape[:2]
    finest = min(row_mm, column_mm)
    new_height = min(round(height * row_mm / finest), height * MAX_ASPECT_STRETCH)
    new_width = min(round(width * column_mm / finest), width * MAX_ASPECT_STRETCH)
    resample = Image.Resampling.NEAREST if is_mask else Image.Resampling.LANCZOS
    stretched = np.asarray(Image.fromarray(pixels).resize((new_width, new_height), resample))
    return stretched, [height, width]


def rgb_component_axis(image: nib.Nifti1Image) -> int | None:
    """The axis holding RGB(A) components, or None for a plain 3-D/4-D volume.

    NIfTI keeps vector components on the 5th dimension (X, Y, Z, 1, 3), which is how ITK and
    SimpleITK save colour images; 2-D colour images are also saved as (X, Y, 1, 3) with a vector
    intent. A 4-D file without such an intent is a time series and is left alone.
    """
    shape = image.shape
    if len(shape) == 5 and shape[4] in RGB_COMPONENTS:
        return 4
    if len(shape) == 4 and shape[3] in RGB_COMPONENTS and image.header.get_intent()[0] in VECTOR_INTENTS:
        return 3
    return None


def _load(path: Path) -> nib.Nifti1Image:
    try:
        # keep_file_open: one IndexedGzipFile (and its seek index) serves every slab read of a .nii.gz
        image = nib.load(str(path), keep_file_open=True)
    except FileNotFoundError as exc:
        raise ConversionError(f"{path} does not exist") from exc
    except Exception as exc:  # nibabel raises several types (ImageFileError, EOFError, OSError, gzip errors)
        raise ConversionError(f"{path} is not a readable NIfTI file ({_cause(exc)})") from exc
    if not isinstance(image, (nib.Nifti1Image, nib.Nifti2Image)):
        raise ConversionError(f"{path} is a {type(image).__name__}, not a NIfTI-1/-2 image")
    _check_budget(image, path)
    return image


def _check_budget(image: nib.Nifti1Image, path: Path) -> None:
    """Refuse, from the header, a volume deeper than the budget's slices (or volumes) or whose largest plane (the
    slice any axis could show) is over its pixels or bytes, before a voxel is read."""
    shape = [int(n) for n in image.shape] + [1, 1, 1]
    spatial = shape[:3]
    try:
        budget.check_slices(path, max(spatial) if spatial[2] > 1 else 1, "slices")
        budget.check_slices(path, int(np.prod(shape[3:])), "volumes or components")
        width, height = sorted(spatial)[1:]
        budget.check_plane(path, width, height, sample_bytes=image.get_data_dtype().itemsize, kind="slice")
    except budget.OverBudget as error:
        raise ConversionError(str(error)) from None


def canonical_orientation(affine: np.ndarray, path: Path) -> np.ndarray:
    """nibabel's orientation (original axis -> RAS+ axis and flip) for a voxel-to-RAS affine."""
    try:
        ornt = io_orientation(affine)
    except Exception as exc:
        raise ConversionError(f"{path} has an affine that cannot be oriented ({_cause(exc)})") from exc
    if np.isnan(ornt).any():
        raise ConversionError(f"{path} has a degenerate affine: an axis has no direction in space")
    return ornt


def _spatial_shape(shape: tuple[int, ...]) -> tuple[int, int, int]:
    """The three spatial sizes; 2-D images count as one slice deep, trailing singleton dims are ignored."""
    padded = tuple(shape) + (1,) * max(0, 3 - len(shape))
    return tuple(int(n) for n in padded[:3])  # type: ignore[return-value]


def check_axis(axis: int, path: Path) -> int:
    if axis not in (0, 1, 2):
        raise ConversionError(
            f"axis {axis} is not a spatial axis of {path}: use 0 (sagittal), 1 (coronal) or 2 (axial)"
        )
    return int(axis)


def pick_volume(shape: tuple[int, ...], frame: int | str, path: Path) -> tuple[int | None, int]:
    """The 4-D volume to show: None for 3-D data; extra singleton dims beyond the 4th are allowed."""
    if len(shape) > 4 and any(n != 1 for n in shape[4:]):
        raise ConversionError(
            f"{path} has {len(shape)} dimensions {tuple(shape)}; only 3-D and 4-D volumes are supported"
        )
    if len(shape) < 4:
        return None, 1
    n_volumes = int(shape[3])
    if frame == "middle":
        return n_volumes // 2, n_volumes
    if not isinstance(frame, int) or not 0 <= frame < n_volumes:
        raise ConversionError(f"volume index {frame!r} is outside 0..{n_volumes - 1} of the 4-D volume {path}")
    return frame, n_volumes


def _slice_index(
    path: Path,
    image: nib.Nifti1Image,
    ornt: np.ndarray,
    options: ConvertOptions,
    canonical_axis: int,
    n_slices: int,
    volume_index: int | None,
) -> tuple[int, str]:
    if options.slice == "middle":
        return n_slices // 2, "middle"
    if options.slice == "mask_max_area":
        mask_path = options.slice_mask or (path if options.as_mask else None)
        if mask_path is None:
            raise ConversionError(f"slice 'mask_max_area' for {path} needs a slice mask (options.slice_mask)")
        return _largest_mask_slice(Path(mask_path), image, ornt, canonical_axis, volume_index), "mask_max_area"
    if isinstance(options.slice, int) and not isinstance(options.slice, bool):
        if not 0 <= options.slice < n_slices:
            raise ConversionError(
                f"slice {options.slice} is outside 0..{n_slices - 1} along {AXIS_NAMES[canonical_axis]} axis of {path}"
            )
        return options.slice, "index"
    raise ConversionError(f"slice {options.slice!r} is not 'middle', 'mask_max_area' or an index")


def _largest_mask_slice(
    mask_path: Path, image: nib.Nifti1Image, ornt: np.ndarray, canonical_axis: int, volume_index: int | None
) -> int:
    """Canonical index of the slice with the most non-zero mask voxels, read slab by slab."""
    same_file = mask_path.resolve() == Path(image.get_filename() or "").resolve()
    mask = image if same_file else _load(mask_path)
    mask_ornt = canonical_orientation(mask.affine, mask_path)
    mask_spatial = _spatial_shape(mask.shape)
    image_spatial = _spatial_shape(image.shape)
    if not np.array_equal(mask_ornt, ornt) or mask_spatial != image_spatial:
        raise ConversionError(
            f"the slice mask {mask_path} (shape {mask_spatial}, {''.join(aff2axcodes(mask.affine))}) does not share "
            f"the grid of the image (shape {image_spatial}, {''.join(aff2axcodes(image.affine))})"
        )
    original_axis = int(np.nonzero(ornt[:, 0] == canonical_axis)[0][0])
    n_slices = mask_spatial[original_axis]
    mask_volume = volume_index if len(mask.shape) >= 4 and mask.shape[3] > 1 else (0 if len(mask.shape) >= 4 else None)
    areas = np.zeros(n_slices, dtype=np.int64)
    step = budget.planes_within(int(np.prod(mask_spatial)) // max(1, n_slices) * mask.get_data_dtype().itemsize,
                                MASK_SCAN_SLAB)
    for start in range(0, n_slices, step):
        stop = min(start + step, n_slices)
        try:
            slab = np.asarray(mask.dataobj[_slicer(mask.shape, original_axis, slice(start, stop), mask_volume)])
        except Exception as exc:  # truncated or corrupt payloads surface here, not at load time
            raise ConversionError(f"the slice mask {mask_path} has unreadable voxel data ({_cause(exc)})") from exc
        slab = slab.reshape(tuple(stop - start if a == original_axis else n for a, n in enumerate(mask_spatial)))
        other_axes = tuple(a for a in range(3) if a != original_axis)
        areas[start:stop] = np.count_nonzero(np.nan_to_num(slab), axis=other_axes)
    if not areas.any():
        raise ConversionError(f"the slice mask {mask_path} is empty, so no slice has the largest mask area")
    canonical_areas = areas[::-1] if ornt[original_axis, 1] == -1 else areas
    return int(np.argmax(canonical_areas))  # the first canonical slice on ties


def _slicer(shape: tuple[int, ...], axis: int, index: int | slice, volume: int | None, component: int = 0) -> tuple:
    """Index for `dataobj`: `index` along `axis`, the whole of the other spatial axes, one volume
    (4th dimension) and one vector component (5th)."""
    key: list[Any] = [slice(None)] * len(shape)
    if len(shape) < 3:  # a 2-D image is read whole (it is one slice deep) and reshaped by the caller
        return tuple(key)
    key[axis] = index
    if len(shape) >= 4:
        key[3] = volume if volume is not None else 0
        for extra in range(4, len(shape)):
            key[extra] = component if extra == 4 else 0
    return tuple(key)


def _read_canonical_slice(
    image: nib.Nifti1Image,
    ornt: np.ndarray,
    original_axis: int,
    original_index: int,
    volume_index: int | None,
    spatial_shape: tuple[int, int, int],
    component: int = 0,
) -> np.ndarray:
    """Read only one slice from disk and give it the canonical (RAS+) layout of the other two axes."""
    keep_dim = slice(original_index, original_index + 1)
    try:
        if original_axis == 2 or len(image.shape) < 3:  # the slowest spatial axis: the slice is contiguous
            slab = np.asarray(image.dataobj[_slicer(image.shape, original_axis, keep_dim, volume_index, component)])
        else:
            slab = _gather_strided_slice(image, original_axis, keep_dim, volume_index, component)
    except Exception as exc:  # truncated or corrupt payloads surface here, not at load time
        raise ConversionError(f"{image.get_filename()} has unreadable voxel data ({_cause(exc)})") from exc
    if len(image.shape) < 3:
        slab = slab.reshape(spatial_shape)[_slicer(spatial_shape, original_axis, keep_dim, None)]
    slab = slab.reshape(tuple(1 if a == original_axis else n for a, n in enumerate(spatial_shape)))
    canonical = apply_orientation(slab, ornt)
    canonical_axis = int(ornt[original_axis, 0])
    return np.take(canonical, 0, axis=canonical_axis)


def _gather_strided_slice(
    image: nib.Nifti1Image, original_axis: int, keep_dim: slice, volume_index: int | None, component: int = 0
) -> np.ndarray:
    """A sagittal/coronal-like slice, gathered from contiguous slabs along the stored last axis.

    Asking nibabel for such a slice directly makes one tiny read per voxel row (seconds for 256³,
    worse in .nii.gz); reading whole contiguous slabs of at most `SLAB_BYTES` and keeping the slice
    is sequential I/O with bounded memory.
    """
    nx, ny, nz = _spatial_shape(image.shape)
    step = max(1, SLAB_BYTES // (nx * ny * 8))  # scaled voxels are at most float64
    parts = []
    for start in range(0, nz, step):
        key = _slicer(image.shape, 2, slice(start, min(start + step, nz)), volume_index, component)
        slab = np.asarray(image.dataobj[key])
        parts.append(slab[(slice(None),) * original_axis + (keep_dim,)].copy())  # a copy frees the slab
    return np.concatenate(parts, axis=2)


def display_spacing(zooms: tuple[float, ...], ornt: np.ndarray, canonical_axis: int) -> list[float]:
    """Voxel size (mm) along the displayed rows and columns, in display order [row, column], from the
    voxel sizes of the stored axes (a missing third one counts as 1)."""
    zooms = (tuple(float(z) for z in zooms) + (1.0, 1.0, 1.0))[:3]
    canonical_zooms = [0.0, 0.0, 0.0]
    for original, (target, _flip) in enumerate(ornt):
        canonical_zooms[int(target)] = float(zooms[original])
    first, second = (a for a in range(3) if a != canonical_axis)
    return [canonical_zooms[second], canonical_zooms[first]]


def window_slice(view: np.ndarray, center_width: tuple[float, float] | None) -> tuple[np.ndarray, dict[str, Any]]:
    """Percentile window over finite non-zero voxels (zero is background outside the body), or the user's."""
    values = view.astype(np.float64, copy=False)
    if center_width is not None:
        return display.grey_to_uint8(values, center_width)
    lo, hi = display.percentile_window(values, ignore=0.0)
    percentiles = f"{display.DEFAULT_LOW_PERCENTILE:g}-{display.DEFAULT_HIGH_PERCENTILE:g}"
    record = {"lo": lo, "hi": hi, "source": f"percentile {percentiles} of non-zero voxels"}
    if hi <= lo:  # every non-zero voxel has one value (a binary volume): window over all voxels, zero included
        lo, hi, source = display.robust_window(values)
        record = {"lo": lo, "hi": hi, "source": f"{source} of all voxels (the non-zero voxels are constant)"}
    return display.window_to_uint8(values, lo, hi), record


def window_rgb(view: np.ndarray, center_width: tuple[float, float] | None) -> tuple[np.ndarray, dict[str, Any]]:
    """RGB components: 8-bit kept; deeper or float data scaled by one window over all three
    components (the percentile window of their finite values, or the user's), keeping the balance."""
    if view.dtype == np.uint8 and center_width is None:
        return view, {"lo": 0, "hi": 255, "source": "8-bit RGB components kept"}
    values = view.astype(np.float64, copy=False)
    if center_width is not None:
        return display.grey_to_uint8(values, center_width)
    lo, hi, source = display.robust_window(values)
    return display.window_to_uint8(values, lo, hi), {"lo": lo, "hi": hi, "source": f"{source} over R, G and B together"}


def volume_shape(path: Path) -> tuple[int, ...]:
    """The stored (x, y, z, ...) size of a volume, from its header only."""
    return tuple(int(n) for n in nib.load(path).shape)


def volume_labels(path: Path) -> np.ndarray:
    """Every voxel of a label volume as an (x, y, z) array, read whole (within the reader budget)."""
    image = nib.load(path)
    budget.check_bytes(path.name, int(np.prod(image.shape, dtype=np.int64)) * image.get_data_dtype().itemsize,
                       f"a label volume of {'×'.join(map(str, image.shape))} voxels, read whole")
    return np.asanyarray(image.dataobj)
