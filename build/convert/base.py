"""The shared interface of the converters: options in, 8-bit pixels plus a record of what was done out.

Each format module exposes `read(path, options) -> Converted`; `mmbu.build.convert.dispatch`
sniffs the format (`sniff.identify`) and calls it with the path to open (for a folder holding an MRXS
slide, the `.mrxs` file inside); it then checks the result (uint8, (H, W) or (H, W, 3), masks 2-D) and
applies `max_size`. Writing PNGs and reports is done once, in `writer.py`/`batch.py`. Display steps
shared by the readers (percentile window, 8-bit mapping, resize, label images) are in `display.py`.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from mmbu.core.geometry import ConversionGeometry
from mmbu.core.text import printable_path

SourceKind = Literal["image", "volume", "slide", "series", "video"]
"""`volume`: a 3-D volume whose slice the converter chooses (its mask is read slice by slice); `slide`: a whole-slide
image openslide may read; `series`: a vendor microscopy file holding several series; `video`: frames over time."""


@dataclass(frozen=True)
class SourceFormat:
    """One format the converter reads, and what the layouts must know of a file of it before anything is read.

    Functions are named `"module:function"` and imported on first use (openslide or gdcm load only when needed).
    """

    reader: str  # read(path, options) -> Converted
    suffixes: tuple[str, ...] = ()  # lower-case names its files go by (".nii.gz" whole), for the layouts' listings
    kind: SourceKind = "image"
    # volumes: the stored (x, y, z, ...) size from the header, and a label volume read whole as (x, y, z)
    volume_shape: str | None = None
    volume_labels: str | None = None
    # volumes: how a file's view key names the slice the converter takes ("axis": `slice=...;axis=...`;
    # "section": an xy section, `z=...` or `slice=...`); None when the layout's frame policy names it (NIfTI)
    view_key: Literal["axis", "section"] | None = None


_ITK = dict(kind="volume", volume_shape="mmbu.build.convert.itk_volumes:volume_shape",
            volume_labels="mmbu.build.convert.itk_volumes:volume_labels", view_key="axis")
SOURCE_FORMATS: dict[str, SourceFormat] = {
    "dicom": SourceFormat("mmbu.build.convert.dicom:read"),
    "nifti": SourceFormat("mmbu.build.convert.nifti:read", (".nii", ".nii.gz"), "volume",
                          "mmbu.build.convert.nifti:volume_shape", "mmbu.build.convert.nifti:volume_labels"),
    "metaimage": SourceFormat("mmbu.build.convert.itk_volumes:read_metaimage", (".mha", ".mhd"), **_ITK),
    "nrrd": SourceFormat("mmbu.build.convert.itk_volumes:read_nrrd", (".nrrd", ".nhdr"), **_ITK),
    "wsi": SourceFormat("mmbu.build.convert.wsi:read", (".svs", ".ndpi", ".mrxs", ".scn", ".vms", ".vmu", ".bif",
                                                          ".svslide", ".tif", ".tiff"), "slide"),
    "ome-tiff": SourceFormat("mmbu.build.convert.tiff:read_ome"),
    "tiff": SourceFormat("mmbu.build.convert.tiff:read_tiff"),
    "czi": SourceFormat("mmbu.build.convert.microscopy_vendors:read_czi", (".czi",), "series"),
    "lif": SourceFormat("mmbu.build.convert.microscopy_vendors:read_lif", (".lif",), "series"),
    "nd2": SourceFormat("mmbu.build.convert.microscopy_vendors:read_nd2", (".nd2",), "series"),
    "vsi": SourceFormat("mmbu.build.convert.microscopy_vendors:read_vsi", (".vsi",), "series"),
    # IMOD's names: .rec reconstructions, .st tilt series, .ali aligned stacks; .mrcs image stacks
    "mrc": SourceFormat("mmbu.build.convert.mrc:read", (".mrc", ".mrcs", ".map", ".rec", ".st", ".ali"), "volume",
                        "mmbu.build.convert.mrc:xyz_shape", "mmbu.build.convert.mrc:labels_xyz", "section"),
    "video": SourceFormat("mmbu.build.convert.video:read", (".mp4", ".m4v", ".mov", ".avi", ".mkv", ".webm"), "video"),
    "raster": SourceFormat("mmbu.build.convert.raster:read"),
}
"""Every format `sniff.identify` may name, in its report order. A new format is a reader module, an entry here and
its content rule in `sniff.py`."""
FORMATS = tuple(SOURCE_FORMATS)
READERS = {name: source.reader for name, source in SOURCE_FORMATS.items()}  # format -> "module:function"


def load_function(named: str) -> Any:
    """The function a `"module:function"` name gives (its module imported now)."""
    module_name, function_name = named.split(":")
    return getattr(importlib.import_module(module_name), function_name)


def formats_named(path: Path, kinds: frozenset[SourceKind] | None = None) -> list[str]:
    """The formats whose files go by `path`'s name (of `kinds` when given), by their suffixes; [] for a name that
    says nothing (a DICOM, TIFF or PNG file is known by its content)."""
    name = path.name.lower()
    return [fmt for fmt, source in SOURCE_FORMATS.items()
            if source.suffixes and name.endswith(source.suffixes) and (kinds is None or source.kind in kinds)]


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
