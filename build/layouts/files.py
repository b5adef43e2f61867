"""File-level helpers shared by the layouts: finding files, sizes, and metadata from headers."""
from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from PIL import Image

from mmbu.build.convert.base import SOURCE_FORMATS, formats_named, load_function
from mmbu.build.fetch.model import TOOLKIT_FILE_PREFIX
from mmbu.core.confinement import ResolvedFolder

WSI_SUFFIXES = SOURCE_FORMATS["wsi"].suffixes  # openslide is asked about these only
NIFTI_SUFFIXES = SOURCE_FORMATS["nifti"].suffixes


def relative(path: Path, raw_dir: Path) -> str:
    """POSIX path of `path` under `raw_dir` (the stable part of a sample id)."""
    return path.resolve().relative_to(raw_dir.resolve()).as_posix()


def glob_files(raw_dir: Path, pattern: str, *, special_files: bool = False) -> list[Path]:
    """Files (not folders) matching a glob under `raw_dir`, sorted so every rebuild sees the same order.

    A file that resolves outside `raw_dir` (a symbolic link out of the dataset) is left out: the layout's
    `add` then reports any table row that names it. So is what the toolkit writes there (`.mmbu-fetch.json`:
    pathlib's `*.json` matches dot files, and the completion record is no annotation file). FIFOs, sockets and
    devices are left out too, unless `special_files`: a reader that refuses them itself without blocking
    (`core.budget`'s annotation readers) then names each in one sentence instead of passing over it in silence.
    """
    folder = ResolvedFolder(raw_dir)
    return sorted(p for p in raw_dir.glob(pattern)
                  if not is_toolkit_file(p.relative_to(raw_dir)) and (p.is_file() or special_files and _special(p))
                  and folder.inside(p))


def _special(path: Path) -> bool:
    """A FIFO, socket or device (links followed)."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def is_toolkit_file(relative: Path) -> bool:
    """Whether a path under a dataset's folder is one the toolkit wrote (named `.mmbu*`), not the dataset's."""
    return any(part.startswith(TOOLKIT_FILE_PREFIX) for part in relative.parts)


def is_nifti(path: Path) -> bool:
    return path.name.lower().endswith(NIFTI_SUFFIXES)


def volume_format(path: Path) -> str | None:
    """The volume format (`base.SOURCE_FORMATS`, kind `volume`) a file's name says, else None."""
    found = formats_named(path, frozenset({"volume"}))
    return found[0] if found else None


def is_volume(path: Path) -> bool:
    """A 3-D volume whose slice the converter chooses: NIfTI, MetaImage, NRRD, MRC (by name)."""
    return volume_format(path) is not None


def volume_shape(path: Path) -> tuple[int, ...]:
    """The stored (x, y, z, ...) size of a volume, from its header only (its format's `volume_shape`)."""
    return load_function(SOURCE_FORMATS[volume_format(path)].volume_shape)(path)


def read_volume_labels(path: Path) -> "np.ndarray":
    """Every voxel of a label volume as an (x, y, z) array (its format's `volume_labels`)."""
    return load_function(SOURCE_FORMATS[volume_format(path)].volume_labels)(path)


def is_dicom(path: Path) -> bool:
    """DICOM Part 10 files carry 'DICM' at byte 128 (sniffed, not guessed from the suffix)."""
    if not path.is_file():  # a FIFO would block the read
        return False
    return _has_dicom_preamble(path)


def _has_dicom_preamble(path: Path) -> bool:
    try:
        with open(path, "rb") as handle:
            handle.seek(128)
            return handle.read(4) == b"DICM"
    except OSError:
        return False


# the errors Path.is_file / Path.is_dir answer False for (pathlib's _ignore_error); any other is raised
_NOT_THERE = (errno.ENOENT, errno.ENOTDIR, errno.EBADF, errno.ELOOP)


@dataclass(frozen=True)
class FileFacts:
    """`Path.is_file()`, `Path.is_dir()` and `is_dicom` of one path from one stat and at most one read, for
    the layouts' per-sample bookkeeping (each of those was asked three or four times per sample)."""

    is_file: bool
    is_dir: bool
    dicom: bool

    @classmethod
    def of(cls, path: Path) -> FileFacts:
        try:
            mode = os.stat(path).st_mode
        except OSError as exc:
            if exc.errno not in _NOT_THERE:
                raise
            return cls(False, False, False)
        except ValueError:  # an embedded NUL, as Path.is_file
            return cls(False, False, False)
        regular = stat.S_ISREG(mode)
        return cls(regular, stat.S_ISDIR(mode), regular and _has_dicom_preamble(path))


def stem(path: Path) -> str:
    """File name without its (possibly double, `.nii.gz`) suffix."""
    name = path.name
    for suffix in NIFTI_SUFFIXES:
        if name.lower().endswith(suffix):
            return name[: -len(suffix)]
    return path.stem


def image_size(path: Path, dicom: bool | None = None) -> tuple[int, int] | None:
    """(width, height) of the source pixel frame, read from headers only; None when unknown.
    `dicom` is `is_dicom(path)` when the caller knows it already."""
    try:
        if is_dicom(path) if dicom is None else dicom:
            from mmbu.build.convert.dicom_io import read_header  # pydicom loads only for DICOM files

            ds = read_header(path, specific_tags=[
                "Rows", "Columns", "TotalPixelMatrixColumns", "TotalPixelMatrixRows"], force=False)
            if ds.get("TotalPixelMatrixColumns") and ds.get("TotalPixelMatrixRows"):  # a slide level, not one tile
                return int(ds.TotalPixelMatrixColumns), int(ds.TotalPixelMatrixRows)
            return int(ds.Columns), int(ds.Rows)
        if is_volume(path):
            shape = volume_shape(path)
            return int(shape[0]), int(shape[1])
        if path.suffix.lower() in WSI_SUFFIXES and _openslide_vendor(path):
            import openslide

            with openslide.OpenSlide(path) as slide:
                return tuple(int(v) for v in slide.dimensions)  # level 0
        with Image.open(path) as image:  # reads the header only
            return image.size
    except Exception:  # noqa: BLE001 - unknown size is a legal answer; the converter reports unreadable files
        return None


def _openslide_vendor(path: Path) -> str | None:
    import openslide

    try:
        return openslide.OpenSlide.detect_format(path)
    except openslide.OpenSlideError:
        return None


DICOM_TAGS = ("Modality", "BodyPartExamined", "InstitutionName")


def header_metadata(path: Path, dicom: bool | None = None) -> dict[str, str]:
    """Per-sample facts found in file headers: DICOM tags and whole-slide properties.

    Keys are `dicom.<Keyword>` and `slide.vendor|objective_power|mpp_x`; the metadata normaliser
    maps them onto the 13 fields. Pixel data is never read. `dicom` as for `image_size`.
    """
    found: dict[str, str] = {}
    if is_dicom(path) if dicom is None else dicom:
        from mmbu.build.convert.dicom_io import read_header

        try:
            ds = read_header(path, specific_tags=list(DICOM_TAGS), force=False)
        except Exception:  # noqa: BLE001 - a broken header leaves the manifest defaults in place
            return found
        for keyword in DICOM_TAGS:
            value = ds.get(keyword)
            if value not in (None, ""):
                found[f"dicom.{keyword}"] = str(value).strip()
    elif path.suffix.lower() in WSI_SUFFIXES:
        vendor = _openslide_vendor(path)
        if vendor:
            import openslide

            with openslide.OpenSlide(path) as slide:
                props = slide.properties
                if vendor != "generic-tiff":  # a tiled TIFF says nothing about the scanner
                    found["slide.vendor"] = str(props.get(openslide.PROPERTY_NAME_VENDOR, vendor))
                for key, prop in (("objective_power", openslide.PROPERTY_NAME_OBJECTIVE_POWER),
                                  ("mpp_x", openslide.PROPERTY_NAME_MPP_X)):
                    if props.get(prop):
                        found[f"slide.{key}"] = str(props[prop])
    return found
