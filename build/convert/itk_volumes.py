"""MetaImage (.mha, .mhd + .raw/.zraw) and NRRD (.nrrd, .nhdr + data file) volumes via SimpleITK,
shown by the NIfTI rules (`mmbu.build.convert.nifti`).

What a caller can rely on:

* **Same display as NIfTI.** ITK keeps geometry in LPS (index → physical point through origin,
  spacing and the direction cosines). The voxel-to-RAS affine is `diag(-1, -1, 1)` times that, and
  from there everything is the NIfTI path: nibabel's `io_orientation` picks the closest canonical
  (RAS+) axes (oblique directions are not resampled; `oblique_degrees` is recorded), `options.axis`
  / `options.slice` / `options.frame` choose the slice and the volume exactly as for NIfTI
  (`middle`, an index in the canonical frame, or `mask_max_area` with a MetaImage/NRRD mask of the
  same grid), and the slice is shown in radiological convention with square pixels from the
  spacing. SimpleITK's `DICOMOrient(image, "RAS")` gives the same canonical array (the tests check).
* **Only the slice is read.** `ImageFileReader` extracts one slice (`SetExtractIndex/Size`): MetaImage
  and raw NRRD stream just that region from disk; compressed data is decompressed by ITK and cut.
* **Detached data files are checked first.** A `.mhd`'s `ElementDataFile` and an `.nhdr`'s
  `data file`, read by the readers' own rules in any spelling they accept (`detached_headers`), must
  name files inside the header's own folder (no absolute paths, no `../`, no link out), which must
  exist and, when uncompressed, hold at least the bytes the header's size and type need.
  Each failure is one sentence naming the header, the data file and the cause.
* **Colour.** Vector pixels with 3 or 4 components (RGB(A), NRRD `RGB-color`) stay colour: 8-bit
  kept, deeper data scaled by one window over the three; alpha dropped.
* **Masks** (`options.as_mask`): values kept, never windowed, nearest; through the same transform.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from nibabel.orientations import aff2axcodes, apply_orientation

from mmbu.build.convert import display
from mmbu.build.convert.base import SQUARE_PIXELS_OFF_NOTE, ConversionError, Converted, ConvertOptions
from mmbu.build.convert.detached_headers import HeaderFields, check_data_files
from mmbu.build.convert.nifti import (
    AXIS_NAMES,
    MASK_SCAN_SLAB,
    RGB_COMPONENTS,
    canonical_orientation,
    check_axis,
    pick_volume,
    radiological_view,
    slice_params,
    square_pixels,
    window_rgb,
    window_slice,
)
from mmbu.core import budget
from mmbu.core.geometry import ConversionGeometry

LPS_TO_RAS = np.diag([-1.0, -1.0, 1.0])
FORMAT_NAMES = {"metaimage": "MetaImage", "nrrd": "NRRD"}
IMAGE_IOS = {"metaimage": "MetaImageIO", "nrrd": "NrrdImageIO"}


def read_metaimage(path: Path, options: ConvertOptions) -> Converted:
    """Convert one slice of a MetaImage volume (`.mha`, or `.mhd` with its data file)."""
    return _convert(Path(path), options, "metaimage")


def read_nrrd(path: Path, options: ConvertOptions) -> Converted:
    """Convert one slice of an NRRD volume (`.nrrd`, or a detached `.nhdr` with its data file)."""
    return _convert(Path(path), options, "nrrd")


@dataclass
class Volume:
    """An opened header: the reader (pixels not read yet) and the geometry in nibabel's terms."""

    path: Path
    format: str
    reader: Any  # SimpleITK.ImageFileReader
    size: tuple[int, ...]  # ITK order: x, y[, z[, t]]
    spacing: tuple[float, ...]
    affine: np.ndarray  # voxel (x, y, z) -> RAS+ mm
    components: int
    pixel_type: str
    data_files: list[str]

    @property
    def sample_bytes(self) -> int:
        """Bytes of one component of one voxel (from ITK's pixel type: `16-bit signed integer`, `64-bit float`)."""
        bits = re.search(r"(\d+)-bit", self.pixel_type)
        return int(bits.group(1)) // 8 if bits else 8

    @property
    def spatial_shape(self) -> tuple[int, int, int]:
        return tuple(int(n) for n in (tuple(self.size[:3]) + (1, 1))[:3])  # type: ignore[return-value]

    def read_slab(self, axis: int, start: int, stop: int, volume: int | None) -> np.ndarray:
        """Voxels [start, stop) along spatial `axis` of one volume, as an (x, y, z[, components]) array."""
        dims = len(self.size)
        index, size = [0] * dims, list(self.size)
        if dims >= 3:
            index[axis], size[axis] = start, stop - start
        if dims >= 4:
            index[3], size[3] = volume or 0, 0  # size 0 collapses the time axis
            for extra in range(4, dims):
                index[extra], size[extra] = 0, 0
        self.reader.SetExtractIndex(index)
        self.reader.SetExtractSize(size)
        import SimpleITK as sitk

        try:
            array = sitk.GetArrayFromImage(self.reader.Execute())
        except RuntimeError as exc:
            raise ConversionError(f"{self.path} has voxel data that cannot be read ({_itk_cause(exc)})") from None
        spatial = 2 if dims == 2 else 3
        order = tuple(reversed(range(spatial))) + tuple(range(spatial, array.ndim))  # ITK arrays are (z, y, x)
        array = array.transpose(order)
        if dims == 2:
            array = array[:, :, None]
        return array


def open_volume(path: Path, format_name: str) -> Volume:
    """Check the header's data files, then read the header (never the pixels) with SimpleITK."""
    import SimpleITK as sitk

    header = check_data_files(path, format_name)
    reader = sitk.ImageFileReader()
    reader.SetFileName(str(path))
    reader.SetImageIO(IMAGE_IOS[format_name])
    try:
        reader.ReadImageInformation()
    except RuntimeError as exc:
        raise ConversionError(
            f"{path} is not a readable {FORMAT_NAMES[format_name]} file ({_itk_cause(exc)})"
        ) from None
    size = tuple(int(n) for n in reader.GetSize())
    dims = len(size)
    spatial = min(dims, 3)
    direction = np.eye(3)
    direction[:spatial, :spatial] = np.asarray(reader.GetDirection(), float).reshape(dims, dims)[:spatial, :spatial]
    spacing = (tuple(float(s) for s in reader.GetSpacing()[:spatial]) + (1.0, 1.0))[:3]
    origin = (tuple(float(o) for o in reader.GetOrigin()[:spatial]) + (0.0, 0.0))[:3]
    affine = np.eye(4)
    affine[:3, :3] = LPS_TO_RAS @ direction @ np.diag(spacing)
    affine[:3, 3] = LPS_TO_RAS @ np.asarray(origin)
    volume = Volume(path, format_name, reader, size, spacing, affine, int(reader.GetNumberOfComponents()),
                    sitk.GetPixelIDValueAsString(reader.GetPixelID()), header.data_files)
    _check_budget(volume)
    _check_data_size(volume, header)
    return volume


def _check_budget(volume: Volume) -> None:
    """Refuse, from the header, a stack deeper than the budget's slices or volumes, or one whose largest plane
    (the slice any axis could show) is over its pixels or bytes, before ITK reads a voxel."""
    shape = volume.spatial_shape
    try:
        # any axis of a 3-D volume may be the one sliced (a 2-D image's long side is its plane's business)
        for count, kind in ((max(shape) if shape[2] > 1 else 1, "slices"),
                            (volume.size[3] if len(volume.size) > 3 else 1, "volumes")):
            budget.check_slices(volume.path, count, kind)
        width, height = sorted(shape)[1:]
        budget.check_plane(volume.path, width, height, channels=volume.components,
                           sample_bytes=volume.sample_bytes, kind="slice")
    except budget.OverBudget as error:
        raise ConversionError(str(error)) from None


def _convert(path: Path, options: ConvertOptions, format_name: str) -> Converted:
    volume = open_volume(path, format_name)
    if len(volume.size) > 4 and any(n != 1 for n in volume.size[4:]):
        raise ConversionError(f"{path} has {len(volume.size)} dimensions {volume.size}; only 2-D, 3-D and 4-D "
                              "images are supported")
    ornt = canonical_orientation(volume.affine, path)
    canonical_axis = check_axis(options.axis, path)
    original_axis = int(np.nonzero(ornt[:, 0] == canonical_axis)[0][0])
    n_slices = volume.spatial_shape[original_axis]
    volume_index, n_volumes = pick_volume(volume.size[:4] if len(volume.size) >= 4 else volume.size,
                                          options.frame, path)
    canonical_index, choice = _slice_index(volume, ornt, options, canonical_axis, n_slices, volume_index)
    flipped = ornt[original_axis, 1] == -1
    original_index = n_slices - 1 - canonical_index if flipped else canonical_index
    slab = volume.read_slab(original_axis, original_index, original_index + 1, volume_index)
    view = radiological_view_of(slab, ornt, original_axis)

    params: dict[str, Any] = {
        "reader": f"SimpleITK {IMAGE_IOS[format_name]}",
        "data_files": volume.data_files,
        "shape": list(volume.size),
        "pixel_type": volume.pixel_type,
        "components": volume.components,
        **slice_params(volume.affine, ornt, volume.spacing, canonical_axis, choice, (canonical_index, original_index),
                       volume_index, n_volumes),
    }
    if view.ndim == 3:  # vector pixels
        if options.as_mask:
            raise ConversionError(f"{path} has {volume.components} components per voxel, so it is not a label mask")
        if volume.components not in RGB_COMPONENTS:
            raise ConversionError(f"{path} has {volume.components} components per voxel; only grey, RGB and RGBA "
                                  "images are shown")
        pixels, params["window"] = window_rgb(np.ascontiguousarray(view[..., :3]), options.window)
    elif options.as_mask:
        pixels, params["window"] = display.to_label_image(view), None
    else:
        pixels, params["window"] = window_slice(view, options.window)
    # the stored frame of a volume is the slice as shown (canonical RAS, radiological view), as for NIfTI:
    # regions come from the mask converted the same way, never from voxel coordinates
    geometry = ConversionGeometry.kept((pixels.shape[1], pixels.shape[0]))
    if options.square_pixels:
        pixels, params["square_pixels_from"] = square_pixels(pixels, params["pixel_spacing_mm"], options.as_mask)
        geometry = geometry.then("square_pixels", (pixels.shape[1], pixels.shape[0]),
                                 how="nearest" if options.as_mask else "lanczos")
    else:
        params["square_pixels_from"] = None
        params["square_pixels"] = {"applied": False, "note": SQUARE_PIXELS_OFF_NOTE}
    return Converted(pixels=pixels, format=format_name, frame=volume_index, params=params, geometry=geometry)


def radiological_view_of(slab: np.ndarray, ornt: np.ndarray, original_axis: int) -> np.ndarray:
    """A one-voxel-thick slab (x, y, z[, components]) in canonical order, shown radiologically."""
    canonical_axis = int(ornt[original_axis, 0])
    if slab.ndim == 3:
        return radiological_view(np.take(apply_orientation(slab, ornt), 0, axis=canonical_axis))
    components = [radiological_view(np.take(apply_orientation(slab[..., c], ornt), 0, axis=canonical_axis))
                  for c in range(slab.shape[-1])]
    return np.stack(components, axis=-1)


def _slice_index(volume: Volume, ornt: np.ndarray, options: ConvertOptions, canonical_axis: int, n_slices: int,
                 volume_index: int | None) -> tuple[int, str]:
    if options.slice == "middle":
        return n_slices // 2, "middle"
    if options.slice == "mask_max_area":
        mask_path = options.slice_mask or (volume.path if options.as_mask else None)
        if mask_path is None:
            raise ConversionError(f"slice 'mask_max_area' for {volume.path} needs a slice mask (options.slice_mask)")
        return _largest_mask_slice(Path(mask_path), volume, ornt, canonical_axis, volume_index), "mask_max_area"
    if isinstance(options.slice, int) and not isinstance(options.slice, bool):
        if not 0 <= options.slice < n_slices:
            raise ConversionError(f"slice {options.slice} is outside 0..{n_slices - 1} along the "
                                  f"{AXIS_NAMES[canonical_axis]} axis of {volume.path}")
        return options.slice, "index"
    raise ConversionError(f"slice {options.slice!r} is not 'middle', 'mask_max_area' or an index")


def _largest_mask_slice(mask_path: Path, image: Volume, ornt: np.ndarray, canonical_axis: int,
                        volume_index: int | None) -> int:
    """Canonical index of the slice with the most non-zero mask voxels, read slab by slab."""
    from mmbu.build.convert.sniff import identify

    mask_format = identify(mask_path).format
    if mask_format not in IMAGE_IOS:
        raise ConversionError(f"the slice mask {mask_path} is {mask_format}, not a MetaImage or NRRD volume like "
                              f"{image.path}")
    mask = image if mask_path.resolve() == image.path.resolve() else open_volume(mask_path, mask_format)
    mask_ornt = canonical_orientation(mask.affine, mask_path)
    if not np.array_equal(mask_ornt, ornt) or mask.spatial_shape != image.spatial_shape:
        raise ConversionError(
            f"the slice mask {mask_path} (size {mask.spatial_shape}, {''.join(aff2axcodes(mask.affine))}) does not "
            f"share the grid of the image (size {image.spatial_shape}, {''.join(aff2axcodes(image.affine))})")
    original_axis = int(np.nonzero(ornt[:, 0] == canonical_axis)[0][0])
    n_slices = mask.spatial_shape[original_axis]
    mask_volume = volume_index if len(mask.size) >= 4 and mask.size[3] > 1 else None
    areas = np.zeros(n_slices, dtype=np.int64)
    other_axes = tuple(a for a in range(3) if a != original_axis)
    plane = int(np.prod(mask.spatial_shape)) // max(1, n_slices) * mask.components * mask.sample_bytes
    step = budget.planes_within(plane, MASK_SCAN_SLAB)
    for start in range(0, n_slices, step):
        stop = min(start + step, n_slices)
        slab = mask.read_slab(original_axis, start, stop, mask_volume)
        areas[start:stop] = np.count_nonzero(np.nan_to_num(slab.reshape(slab.shape[:3])), axis=other_axes)
    if not areas.any():
        raise ConversionError(f"the slice mask {mask_path} is empty, so no slice has the largest mask area")
    canonical_areas = areas[::-1] if ornt[original_axis, 1] == -1 else areas
    return int(np.argmax(canonical_areas))


def _check_data_size(volume: Volume, header: HeaderFields) -> None:
    """An uncompressed detached data file must hold what the header's size and pixel type need."""
    fields = header.fields
    if volume.format == "metaimage":
        compressed = fields.get("compresseddata", "False").lower() == "true"
        skip = _integer(fields.get("headersize", "0"))
    else:
        compressed = fields.get("encoding", "raw").lower() not in ("raw",)
        skip = _integer(fields.get("byteskip", "0"))
    if compressed or skip is None or skip < 0:
        return  # compressed sizes are not predictable; byte skip -1 means "the data sit at the end"
    bits = re.search(r"(\d+)-bit", volume.pixel_type)
    if bits is None:
        return
    needed = int(np.prod(volume.size, dtype=np.int64)) * volume.components * int(bits.group(1)) // 8
    if volume.data_files:
        files = [volume.path.parent / name for name in volume.data_files]
        held = sum(f.stat().st_size for f in files if f.is_file()) - skip * len(files)
        where = volume.data_files[0] if len(files) == 1 else f"the {len(files)} data files"
    elif volume.format == "metaimage" and header.header_bytes is not None:
        held = volume.path.stat().st_size - header.header_bytes
        where = "the data after its header"
    else:
        return  # attached NRRD data: ITK reports a short read itself
    if held < needed:
        size = "×".join(str(n) for n in volume.size)
        raise ConversionError(f"{volume.path}: {where} holds {held} bytes, but the header's size {size} of "
                              f"{volume.pixel_type} ({volume.components} component(s)) needs {needed}; "
                              "the data are truncated")


def _integer(text: str) -> int | None:
    try:
        return int(text.split()[0]) if text.split() else 0
    except ValueError:
        return None


def _itk_cause(exc: BaseException) -> str:
    """ITK's exception text without its source-file preamble: the 'Description:' line when present."""
    text = str(exc)
    for line in text.splitlines():
        if line.strip().startswith("Description:"):
            return line.split("Description:", 1)[1].strip().rstrip(".")
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return (lines[-1] if lines else type(exc).__name__).rstrip(".")


def _header(path: Path) -> Any:
    import SimpleITK as sitk

    reader = sitk.ImageFileReader()
    reader.SetFileName(str(path))
    reader.ReadImageInformation()
    return reader


def volume_shape(path: Path) -> tuple[int, ...]:
    """The stored (x, y, z, ...) size of a MetaImage or NRRD volume, from its header only."""
    return tuple(int(n) for n in _header(path).GetSize())


def volume_labels(path: Path) -> np.ndarray:
    """Every voxel of a MetaImage or NRRD label volume as an (x, y, z) array, read whole (within the reader budget)."""
    import SimpleITK as sitk

    reader = _header(path)
    bits = re.search(r"(\d+)-bit", sitk.GetPixelIDValueAsString(reader.GetPixelID()))
    voxel_bytes = reader.GetNumberOfComponents() * (int(bits.group(1)) // 8 if bits else 8)
    budget.check_bytes(path.name, int(np.prod(reader.GetSize(), dtype=np.int64)) * voxel_bytes,
                       f"a label volume of {'×'.join(map(str, reader.GetSize()))} voxels, read whole")
    array = sitk.GetArrayFromImage(reader.Execute())
    return array.transpose(tuple(reversed(range(array.ndim))))
