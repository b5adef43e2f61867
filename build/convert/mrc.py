"""MRC / MRCS maps, tomograms and image stacks (cryo-EM, cryo-ET, IMOD) to one 8-bit section.

What a caller can rely on:

* **The field's reader, strict.** `mrcfile` (CCP-EM) opens the file memory-mapped (`mrcfile.mmap`,
  never `permissive=True`): its header validation (the `MAP ` stamp, mode, sizes) refuses a bad file,
  and a file shorter than its header's size and mode need is refused before the data are mapped.
  Each refusal is one sentence naming the file. Only the section shown (and, for `mask_max_area`,
  the mask's sections a slab at a time) is read from disk.
* **Axes.** mrcfile gives (z, y, x) arrays for volumes and image stacks (`.mrcs`: z is the image
  index) and (volume, z, y, x) for volume stacks. The section is an xy plane: `options.slice` picks it
  when it is an index, or `"mask_max_area"` (the section where `options.slice_mask`, or the mask itself,
  has the most non-zero voxels), else `options.z` (an index; `"middle"` = nz // 2, the default);
  `options.frame` picks the volume of a volume stack (`"middle"` or an index). `options.axis` does not apply (MRC has no patient
  frame; sections are what IMOD and the cryo-ET tools show).
* **y up.** The MRC convention puts the origin at the bottom left (MRC2014; IMOD's 3dmod, Chimera),
  so the section is shown with row 0 of the array at the *bottom*: `pixels = section[::-1]`. napari
  and plain NumPy show row 0 at the top, i.e. the same section flipped vertically; an image and its
  mask go through the identical flip, so they align either way.
* **Modes → dtypes.** mrcfile's mapping (0 int8, 1 int16, 2 float32, 6 uint16, 12 float16); mode 0
  written by IMOD without its "signed bytes" flag (imodStamp, imodFlags bit 1) holds unsigned bytes
  and is read as uint8. Complex modes (3, 4: Fourier transforms) are refused.
* **Intensities** as for every other microscopy plane (`tiff.grey_channel`): 8-bit unsigned kept,
  anything else (int8, 16-bit, float) a 0.5-99.5 percentile window over the section's finite values
  (zero is a density like any other in EM, so it is not left out), or `options.window`.
* **Voxel size** from the header (`voxel_size`, Å) and the axis order (`mapc`, `mapr`, `maps`: 1, 2, 3 for
  tomograms; a crystallographic map may permute them, and the section is then the stored one) are
  recorded; a section whose x and y sizes differ is resampled to square pixels
  (`options.square_pixels`), nearest for masks.
* **Masks** (`options.as_mask`): label values kept, never windowed, the same flip and resampling.
"""
from __future__ import annotations

import importlib.metadata
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import tifffile

from mmbu.build.convert import display
from mmbu.build.convert.base import (
    SQUARE_PIXELS_OFF_NOTE,
    ConversionError,
    Converted,
    ConvertOptions,
    exception_summary as _cause,
)
from mmbu.build.convert.nifti import MASK_SCAN_SLAB, square_pixels
from mmbu.build.convert.tiff import grey_channel
from mmbu.core import budget
from mmbu.core.geometry import ConversionGeometry

HEADER_BYTES = 1024
IMOD_STAMP = 1146047817  # imodStamp (byte 152) of files written by IMOD
IMOD_SIGNED_BYTES = 1  # imodFlags (byte 156) bit: mode 0 bytes are signed
COMPLEX_MODES = (3, 4)
MINISBLACK = tifffile.PHOTOMETRIC.MINISBLACK  # MRC densities are never stored inverted
Y_UP_NOTE = ("y up: array row 0 at the bottom (MRC origin bottom left, as IMOD's 3dmod shows it; napari shows "
             "row 0 at the top)")


def read(path: Path, options: ConvertOptions) -> Converted:
    """Convert one xy section of an MRC volume, image stack or volume stack."""
    path = Path(path)
    with open_mrc(path) as mrc:
        data = mrc.data
        volume_index, n_volumes = _pick_volume(data, options.frame, path)
        stack = data[volume_index] if volume_index is not None else (data if data.ndim == 3 else data[None])
        n_sections = int(stack.shape[0])
        z, choice = _pick_section(path, options, n_sections, volume_index)
        section = np.array(stack[z])  # a copy: the memory map closes with the file
        unsigned = _imod_unsigned_bytes(mrc)
        if unsigned:
            section = section.view(np.uint8)
        voxel = tuple(float(v) for v in mrc.voxel_size.item())  # (x, y, z) in Å
        params: dict[str, Any] = {
            "reader": _version(),
            "mode": int(mrc.header.mode),
            "dtype": str(section.dtype),
            "shape": [int(n) for n in data.shape],
            "kind": _kind(mrc),
            "z_choice": choice,
            "z": z,
            "n_z": n_sections,
            "volume_index": volume_index,
            "n_volumes": n_volumes,
            "voxel_size_angstrom": list(voxel),
            # columns, rows, sections = which of x, y, z (1, 2, 3 for tomograms; CCP4 maps may permute them)
            "map_axes": [int(mrc.header.mapc), int(mrc.header.mapr), int(mrc.header.maps)],
            "display": Y_UP_NOTE,
        }
        if unsigned:
            params["mode_0"] = "unsigned bytes (IMOD stamp without its signed-bytes flag)"
    shown = np.ascontiguousarray(section[::-1])  # y up
    if options.as_mask:
        try:
            pixels = display.to_label_image(shown)
        except ConversionError as exc:
            raise ConversionError(f"{path}: {exc}") from None
        params["window"] = None
    else:
        pixels, records = grey_channel(shown, None, options.window, MINISBLACK, None)
        params["window"] = records[0]["window"]
    # the stored frame of a volume is the section as shown (as for NIfTI): regions come from the mask
    # converted the same way, never from voxel coordinates
    geometry = ConversionGeometry.kept((pixels.shape[1], pixels.shape[0]))
    if options.square_pixels:
        pixels, params["square_pixels_from"] = square_pixels(pixels, [voxel[1], voxel[0]], options.as_mask)
        geometry = geometry.then("square_pixels", (pixels.shape[1], pixels.shape[0]),
                                 how="nearest" if options.as_mask else "lanczos")
    else:
        params["square_pixels_from"] = None
        params["square_pixels"] = {"applied": False, "note": SQUARE_PIXELS_OFF_NOTE}
    return Converted(pixels=pixels, format="mrc", frame=volume_index, params=params, geometry=geometry)


def open_mrc(path: Path) -> Any:
    """The file opened memory-mapped by mrcfile in strict mode, after checking it holds its data.

    Returns mrcfile's `MrcMemmap` (a context manager). Every failure is a ConversionError naming the file.
    """
    import mrcfile

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # strict mode raises on what matters; the rest is noise here
            with mrcfile.open(str(path), header_only=True) as header_file:
                header = header_file.header
                needed = _data_bytes(header, path)
                _check_budget(header, path)
                offset = HEADER_BYTES + int(header.nsymbt)
        size = path.stat().st_size
        if size < offset + needed:
            raise ConversionError(
                f"{path} is a truncated MRC file: its header's size {int(header.nx)}×{int(header.ny)}×"
                f"{int(header.nz)} of mode {int(header.mode)} needs {needed} bytes of data after "
                f"{offset} header bytes, but the file holds {max(0, size - offset)}")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            mrc = mrcfile.mmap(str(path), mode="r", permissive=False)
    except ConversionError:
        raise
    except (ValueError, OSError, EOFError) as exc:
        raise ConversionError(f"{path} is not a readable MRC file ({_cause(exc)})") from None
    if mrc.data is None or mrc.data.size == 0:
        mrc.close()
        raise ConversionError(f"{path} is an MRC file without voxel data")
    return mrc


def _check_budget(header: Any, path: Path) -> None:
    """Refuse, from the header, a section over the budget's pixels or bytes or a stack deeper than its slices
    (a sparse file of 50000² declares 2.5 GB a section and costs no disk)."""
    from mrcfile.utils import data_dtype_from_header

    try:
        budget.check_slices(path, int(header.nz), "sections")
        budget.check_plane(path, int(header.nx), int(header.ny), sample_bytes=data_dtype_from_header(header).itemsize,
                           kind="section")
    except budget.OverBudget as error:
        raise ConversionError(str(error)) from None


def _data_bytes(header: Any, path: Path) -> int:
    from mrcfile.utils import data_dtype_from_header

    mode = int(header.mode)
    if mode in COMPLEX_MODES:
        raise ConversionError(f"{path} holds complex values (MRC mode {mode}, a Fourier transform), not an image")
    try:
        dtype = data_dtype_from_header(header)
    except ValueError:
        raise ConversionError(f"{path} has MRC mode {mode}, which mrcfile does not read (modes 0, 1, 2, 6, 12)") \
            from None
    sizes = [int(header.nx), int(header.ny), int(header.nz)]
    if min(sizes) < 1:
        raise ConversionError(f"{path} declares a size of {sizes[0]}×{sizes[1]}×{sizes[2]} voxels")
    return int(np.prod(sizes, dtype=np.int64)) * dtype.itemsize


def xyz_shape(path: Path) -> tuple[int, int, int]:
    """(nx, ny, nz) from the header, in the (x, y, z) order the layouts compare volumes in."""
    with open_mrc(path) as mrc:
        shape = mrc.data.shape
    return int(shape[-1]), int(shape[-2]), int(shape[-3]) if len(shape) >= 3 else 1


def labels_xyz(path: Path) -> np.ndarray:
    """Every voxel of an MRC label volume as an (x, y, z) array (a volume stack: its first volume)."""
    with open_mrc(path) as mrc:
        volume = mrc.data[0] if mrc.data.ndim == 4 else mrc.data
        try:
            budget.check_bytes(path, volume.nbytes, "a label volume read whole")
        except budget.OverBudget as error:
            raise ConversionError(str(error)) from None
        data = np.array(volume)
        if _imod_unsigned_bytes(mrc):
            data = data.view(np.uint8)
    return (data if data.ndim == 3 else data[None]).T


def _pick_volume(data: np.ndarray, frame: int | str, path: Path) -> tuple[int | None, int]:
    if data.ndim < 4:
        return None, 1
    n_volumes = int(data.shape[0])
    if frame == "middle":
        return n_volumes // 2, n_volumes
    if isinstance(frame, int) and not isinstance(frame, bool) and 0 <= frame < n_volumes:
        return frame, n_volumes
    raise ConversionError(f"volume index {frame!r} is outside 0..{n_volumes - 1} of the volume stack {path}")


def _pick_section(path: Path, options: ConvertOptions, n_sections: int, volume_index: int | None) -> tuple[int, str]:
    if options.slice == "mask_max_area":
        mask_path = options.slice_mask or (path if options.as_mask else None)
        if mask_path is None:
            raise ConversionError(f"slice 'mask_max_area' for {path} needs a slice mask (options.slice_mask)")
        return _largest_mask_section(Path(mask_path), path, n_sections, volume_index), "mask_max_area"
    for wanted, name in ((options.slice, "slice"), (options.z, "z")):
        if isinstance(wanted, int) and not isinstance(wanted, bool):
            if 0 <= wanted < n_sections:
                return wanted, "index"
            raise ConversionError(f"{name} index {wanted} is outside 0..{n_sections - 1} of {path}")
    return n_sections // 2, "middle"


def _largest_mask_section(mask_path: Path, image_path: Path, n_sections: int, volume_index: int | None) -> int:
    """The section with the most non-zero mask voxels (the first on ties), read a slab at a time."""
    with open_mrc(mask_path) as mask:
        data = mask.data
        if data.ndim == 4:  # a volume stack: the image's volume, or the first when the image is one volume
            data = data[volume_index if volume_index is not None and volume_index < len(data) else 0]
        stack = data if data.ndim == 3 else data[None]
        if stack.shape[0] != n_sections:
            raise ConversionError(f"the slice mask {mask_path} has {stack.shape[0]} sections but {image_path} has "
                                  f"{n_sections}")
        areas = np.zeros(n_sections, dtype=np.int64)
        step = budget.planes_within(stack[0].nbytes, MASK_SCAN_SLAB)
        for start in range(0, n_sections, step):
            slab = np.asarray(stack[start:start + step])
            areas[start:start + len(slab)] = np.count_nonzero(np.nan_to_num(slab).reshape(len(slab), -1), axis=1)
    if not areas.any():
        raise ConversionError(f"the slice mask {mask_path} is empty, so no section has the largest mask area")
    return int(np.argmax(areas))


def _imod_unsigned_bytes(mrc: Any) -> bool:
    """Mode 0 from IMOD without the signed flag holds unsigned bytes (IMOD's mrc_format.txt)."""
    if int(mrc.header.mode) != 0:
        return False
    order = mrc.header.mode.dtype.byteorder
    stamp, flags = np.frombuffer(mrc.header.tobytes()[152:160], dtype=np.dtype(np.int32).newbyteorder(order))
    return int(stamp) == IMOD_STAMP and not int(flags) & IMOD_SIGNED_BYTES


def _kind(mrc: Any) -> str:
    if mrc.is_volume_stack():
        return "volume stack"
    if mrc.is_image_stack():
        return "image stack"
    if mrc.is_volume():
        return "volume"
    return "single image"


def _version() -> str:
    try:
        return f"mrcfile {importlib.metadata.version('mrcfile')}"
    except importlib.metadata.PackageNotFoundError:
        return "mrcfile"


