"""The shared interface of the converters: options in, 8-bit pixels plus a record of what was done out.

Each format module exposes `read(path, options) -> Converted`; `mmbu.build.convert.dispatch`
sniffs the format (`sniff.identify`) and calls it with the path to open (for a folder holding an MRXS
slide, the `.mrxs` file inside); it then checks the result (uint8, (H, W) or (H, W, 3), masks 2-D) and
applies `max_size`. Writing PNGs and reports is done once, in `writer.py`/`batch.py`. Display steps
shared by the readers (percentile window, 8-bit mapping, resize, label images) are in `display.py`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from mmbu.core.geometry import ConversionGeometry
from mmbu.core.text import printable_path

FORMATS = ("dicom", "nifti", "metaimage", "nrrd", "wsi", "ome-tiff", "tiff", "czi", "lif", "nd2", "vsi", "mrc", "video",
           "raster")

# format -> "module:function" that reads it (imported lazily: openslide or gdcm load only when needed)
READERS = {
    "dicom": "mmbu.build.convert.dicom:read",
    "nifti": "mmbu.build.convert.nifti:read",
    "metaimage": "mmbu.build.convert.itk_volumes:read_metaimage",
    "nrrd": "mmbu.build.convert.itk_volumes:read_nrrd",
    "wsi": "mmbu.build.convert.wsi:read",
    "ome-tiff": "mmbu.build.convert.tiff:read_ome",
    "tiff": "mmbu.build.convert.tiff:read_tiff",
    "czi": "mmbu.build.convert.microscopy_vendors:read_czi",
    "lif": "mmbu.build.convert.microscopy_vendors:read_lif",
    "nd2": "mmbu.build.convert.microscopy_vendors:read_nd2",
    "vsi": "mmbu.build.convert.microscopy_vendors:read_vsi",
    "mrc": "mmbu.build.convert.mrc:read",
    "video": "mmbu.build.convert.video:read",
    "raster": "mmbu.build.convert.raster:read",
}

WSI_DEFAULT_MAX_SIZE = 2048
# recorded as params["square_pixels"]["note"] when ConvertOptions.square_pixels is False
SQUARE_PIXELS_OFF_NOTE = "turned off (square_pixels false / --no-square-pixels): the stored grid is kept"


class ConversionError(Exception):
    """A file cannot be converted. The message is one readable sentence naming the cause."""


def exception_summary(exc: BaseException) -> str:
    """A library's exception as a clause to put inside a ConversionError sentence.

    Its first line without a trailing full stop (decoders often append a traceback-like tail or a
    period that would break the sentence), or the exception's type name when it carries no text.
    """
    text = str(exc).strip().rstrip(".")
    return text.splitlines()[0] if text else type(exc).__name__


def non_utf8_name_error(path: str | Path) -> str | None:
    """One sentence when `path` is not valid UTF-8 (its ids and reports could not name it), else None."""
    shown = printable_path(path)
    if shown == str(path):
        return None
    return f"{shown} has a file name that is not valid UTF-8; rename it (e.g. with convmv) to include it"


def regular_file_error(path: Path) -> str | None:
    """One sentence when `path` exists but is not a regular file (a FIFO, socket or device would block
    or never end a read), else None. Symbolic links are followed."""
    import stat

    try:
        mode = path.stat().st_mode
    except OSError:
        return None  # missing or unreadable: the caller's own check says which
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    kind = "a FIFO (named pipe)" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode) else "a device"
    return f"{printable_path(path)} is {kind}, not a regular file; only regular files are read"


@dataclass(frozen=True)
class ConvertOptions:
    """What the caller wants; every field ends up in the report's `params` when it mattered."""

    as_mask: bool = False  # label image: values kept, nearest-neighbour only, never windowed
    max_size: int | None = None  # longest output side; None = 2048 for WSI, original size otherwise
    frame: int | Literal["middle"] = "middle"  # 0-based DICOM frame, TIFF page, NIfTI 4D volume
    slice: int | Literal["middle", "mask_max_area"] = "middle"  # NIfTI slice along `axis`
    axis: int = 2  # NIfTI axis after reorientation to RAS (2 = axial)
    window: tuple[float, float] | None = None  # (center, width) overriding the file's window
    window_index: int = 0  # which of a DICOM file's alternative windows / VOI LUTs to apply
    slice_mask: Path | None = None  # mask volume that picks the slice when slice == "mask_max_area"
    # non-square pixels (DICOM pixel spacing / aspect ratio, NIfTI voxel spacing in the shown plane) are
    # resampled to square ones; False keeps the stored grid (headers known to be wrong, stored-grid outputs)
    square_pixels: bool = True
    # vendor microscopy (CZI, LIF, ND2, VSI): which series (index or name), Z plane and time point
    series: int | str = 0
    z: int | Literal["middle"] = "middle"  # also the section of an MRC volume or image stack
    t: int | Literal["middle"] = "middle"
    # video: the frame at this time in seconds (the first frame shown at or after it); overrides `frame`
    frame_time: float | None = None


@dataclass
class Converted:
    """8-bit pixels ready for PNG: (H, W) grayscale or (H, W, 3) RGB; label values for masks.

    `geometry` says how the stored frame became these pixels (`mmbu.core.geometry`); the layouts map
    boxes and masks with it, and `dispatch.check_converted` refuses a reader's result without one or with
    one that does not end at the pixels' size.
    """

    pixels: np.ndarray
    format: str
    frame: int | None = None
    params: dict[str, Any] = field(default_factory=dict)
    geometry: ConversionGeometry | None = None
    # A PNG stream that decodes to exactly `pixels` (a source PNG's own chunks, `png_stream.image_stream`): the
    # writer stores it instead of encoding again. Anything that changes `pixels` afterwards must drop it.
    png: bytes | None = None

    @property
    def mode(self) -> str:
        return "RGB" if self.pixels.ndim == 3 else "L"

    @property
    def height(self) -> int:
        return int(self.pixels.shape[0])

    @property
    def width(self) -> int:
        return int(self.pixels.shape[1])
