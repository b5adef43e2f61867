"""Identify a source's format from its content, not its name.

`identify(path)` returns the format (one of `base.FORMATS`) and the path its reader should open —
usually the same path, but for a directory holding one multi-file slide it is the file inside that
openslide opens: the `.mrxs` of a MIRAX slide, or one instance of a DICOM whole-slide series.
Anything that is not an image we can convert (empty, unknown, encrypted, an archive, a PDF) is a
`ConversionError` whose message says what the file is and why it cannot be converted.

Order matters: magic numbers first (cheap, unambiguous: DICOM, MRC, raster, NIfTI, CZI, LIF, ND2, video
containers, NRRD, MetaImage header lines), then TIFF flavours (Olympus VSI, OME-XML, then openslide's
vendor detection), then DICOM without a preamble (pydicom with sanity checks), then openslide for the
remaining vendor files (MRXS, VMS), then Pillow's own identification as a last resort.
"""
from __future__ import annotations

import gzip
import logging
import struct
import warnings
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from mmbu.core import budget
from mmbu.build.convert.base import SOURCE_FORMATS, ConversionError, regular_file_error

if TYPE_CHECKING:
    from pydicom import Dataset

# SOP Class UID of DICOM whole-slide images: read through openslide, never as one DICOM frame
VL_WHOLE_SLIDE_MICROSCOPY = "1.2.840.10008.5.1.4.1.1.77.1.6"

HEADER_BYTES = 1024

RASTER_MAGIC = (
    (b"\xff\xd8\xff", "JPEG"),
    (b"\x89PNG\r\n\x1a\n", "PNG"),
    (b"GIF87a", "GIF"),
    (b"GIF89a", "GIF"),
    (b"BM", "BMP"),
    (b"\x00\x00\x00\x0cjP  \r\n\x87\n", "JPEG 2000"),
)
JP2_SIGNATURE = b"\x00\x00\x00\x0cjP  \r\n\x87\n"
# ISO base media brands that are still images, not video (HEIF/AVIF photographs)
IMAGE_BRANDS = frozenset({b"heic", b"heix", b"heim", b"heis", b"mif1", b"msf1", b"avif", b"avis"})
TAG_OLYMPUS_SIS = 33560  # private TIFF tag of Olympus/Evident cellSens .vsi files
MRC_MAP_STAMP = b"MAP "  # MRC2014 / CCP4 map id at byte 208 (mrcfile refuses files without it)
TIFF_MAGIC = (b"II*\x00", b"MM\x00*", b"II+\x00", b"MM\x00+")  # classic and BigTIFF, both byte orders

# Things people put in data folders that are not images: magic -> what to tell them
NOT_IMAGES = (
    (b"%PDF-", "a PDF document"),
    (b"Rar!\x1a\x07", "a RAR archive; extract it first"),
    (b"7z\xbc\xaf\x27\x1c", "a 7-Zip archive; extract it first"),
    (b"BZh", "a bzip2-compressed file; decompress it first"),
    (b"\xfd7zXZ\x00", "an xz-compressed file; decompress it first"),
    (b"\x89HDF\r\n\x1a\n", "an HDF5 file, which holds datasets by key; name the dataset in an arrays layout "
                          "(images: {file, key})"),
    (b"\x93NUMPY", "a NumPy array file, not an image this converter reads"),
)

# openslide vendors that are always whole-slide images
WSI_VENDORS = frozenset({"aperio", "hamamatsu", "leica", "mirax", "philips", "sakura", "trestle", "ventana", "synthetic", "dicom", "zeiss"})


@dataclass(frozen=True)
class Identified:
    """What a source is: the format key, the path to hand to its reader, and a detail for the report."""

    format: str
    path: Path
    detail: str = ""


def identify(path: str | Path) -> Identified:
    """Sniff the format of `path` (a file, or a directory holding one multi-file slide)."""
    path = Path(path)
    if path.is_dir():
        slide = mrxs_in_directory(path)
        if slide is not None:
            return Identified("wsi", slide, "mirax")
        series = dicom_slides_in_directory(path)
        if len(series) == 1:
            return Identified("wsi", series[0].representative, "dicom")
        raise ConversionError(
            f"{path} is a directory without a multi-file slide in it "
            "(an .mrxs slide, or the instances of one DICOM whole-slide series)"
        )
    if not path.exists():
        raise ConversionError(f"{path} does not exist")
    if problem := regular_file_error(path):  # opening a FIFO would block the whole batch
        raise ConversionError(problem)
    head = _read_head(path)
    if path.suffix.lower() == ".mrxs":
        return _identify_mrxs(path)  # the index file may even be empty: the slide lives in its folder
    if not head:
        raise ConversionError(f"{path} is empty (0 bytes)")

    if head[128:132] == b"DICM":
        return _identify_dicom(path)
    if head[208:212] == MRC_MAP_STAMP:
        return Identified("mrc", path, "MRC")
    if head.startswith(JP2_SIGNATURE) and path.suffix.lower() == ".nd2":
        return Identified("nd2", path, "Nikon ND2 (legacy, JPEG 2000 based)")  # old NIS-Elements files
    for magic, name in RASTER_MAGIC:
        if head.startswith(magic):
            return Identified("raster", path, name)
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return Identified("raster", path, "WebP")
    if head[:4] in TIFF_MAGIC:
        return _identify_tiff(path)
    nifti = _nifti_version(head)
    if nifti:
        return Identified("nifti", path, nifti)
    if head.startswith(b"ZISRAWFILE"):
        return Identified("czi", path, "Zeiss CZI")
    if head[:4] == b"\x70\x00\x00\x00" and head[8:9] == b"\x2a":
        return Identified("lif", path, "Leica LIF")
    if head[:4] == b"\xda\xce\xbe\x0a":
        return Identified("nd2", path, "Nikon ND2")
    video = _video_container(head)
    if video:
        return Identified("video", path, video)
    if head.startswith(b"NRRD000"):
        return Identified("nrrd", path, head[:8].decode("ascii", "replace"))
    if _is_metaimage_header(head):
        return Identified("metaimage", path, "MetaImage")
    if head[:2] == b"\x1f\x8b":
        nifti = _nifti_version(_gunzip_head(path))
        if nifti:
            return Identified("nifti", path, nifti + " (gzip)")
        raise ConversionError(f"{path} is a gzip-compressed file that does not hold a NIfTI image")
    _refuse_non_images(path, head)
    if path.suffix.lower() in SOURCE_FORMATS["mrc"].suffixes:  # no MAP stamp: mrcfile's validation says why
        return Identified("mrc", path, "MRC (by its name: no MAP stamp)")
    if _looks_like_dicom_without_preamble(head):
        return _identify_dicom(path)
    vendor = _openslide_vendor(path)
    if vendor in WSI_VENDORS:
        return Identified("wsi", path, vendor)
    pillow_format = _pillow_format(path)
    if pillow_format:
        return Identified("raster", path, pillow_format)
    raise ConversionError(f"{path} is not an image format this converter knows (DICOM, NIfTI, MetaImage, NRRD, TIFF, whole-slide, CZI, LIF, ND2, VSI, MRC, MP4/AVI/MKV video, JPEG/PNG/BMP/GIF/WebP)")


# keys a MetaImage header (MetaIO) may start with; NDims must follow somewhere in its first lines
METAIMAGE_FIRST_KEYS = frozenset({
    "ObjectType", "ObjectSubType", "NDims", "Comment", "Name", "ID", "ParentID", "TransformType", "AcquisitionDate",
    "BinaryData", "BinaryDataByteOrderMSB", "ElementByteOrderMSB", "CompressedData", "FormTypeName",
})


def _is_metaimage_header(head: bytes) -> bool:
    """A MetaImage header: text `Key = Value` lines, the first a MetaIO key, and an `NDims` field."""
    lines = [line.strip() for line in head.decode("latin-1").splitlines() if line.strip()]
    if not lines or "=" not in lines[0]:
        return False
    if lines[0].split("=", 1)[0].strip() not in METAIMAGE_FIRST_KEYS:
        return False
    return any(line.split("=", 1)[0].strip() == "NDims" for line in lines if "=" in line)


def _video_container(head: bytes) -> str:
    """'MP4/QuickTime', 'AVI' or 'Matroska/WebM' from the container's magic; '' for anything else."""
    if head[4:8] == b"ftyp" and head[8:12] not in IMAGE_BRANDS:
        return "MP4/QuickTime"
    if head[:4] == b"RIFF" and head[8:12] == b"AVI ":
        return "AVI"
    if head[:4] == b"\x1a\x45\xdf\xa3":
        return "Matroska/WebM"
    return ""


def _identify_mrxs(path: Path) -> Identified:
    if _openslide_vendor(path) == "mirax":
        return Identified("wsi", path, "mirax")
    raise ConversionError(
        f"{path} is an MRXS slide index that openslide cannot open; it needs its data folder "
        f"{path.with_suffix('').name}/ (Slidedat.ini and .dat files) beside it"
    )


def mrxs_in_directory(directory: Path) -> Path | None:
    """The `.mrxs` file of a MIRAX slide directory (a `.mrxs` file next to its same-named data folder)."""
    slides = sorted(p for p in directory.glob("*.mrxs") if p.is_file())
    return slides[0] if len(slides) == 1 else None


@dataclass(frozen=True)
class DicomSlideSeries:
    """The instances of one DICOM whole-slide image (one Series Instance UID) in one folder.

    openslide opens such a slide from any one instance and finds the others itself by scanning that
    instance's folder for the same series (pyramid levels, label, overview), so the series is converted
    once, through `representative`: the instance with the largest total pixel matrix (the base level),
    the first by name on ties. The other instances are its companions.
    """

    series_uid: str
    instances: tuple[Path, ...]  # sorted by name
    representative: Path


def dicom_slides_in_directory(directory: Path) -> list[DicomSlideSeries]:
    """The DICOM whole-slide series whose instances sit directly in `directory` (not in sub-folders,
    which openslide does not search), in order of their representative's name.

    Only Part-10 files (the `DICM` magic, which openslide requires) are looked at; the file meta says
    whether one is a whole-slide instance, and only those have their header read.
    """
    by_series: dict[str, list[tuple[int, Path]]] = {}
    for entry in sorted(directory.iterdir(), key=lambda p: p.name):
        if entry.name.startswith(".") or not entry.is_file():
            continue
        found = _dicom_slide_instance(entry)
        if found is not None:
            series_uid, pixels = found
            by_series.setdefault(series_uid, []).append((pixels, entry))
    slides = []
    for series_uid, members in by_series.items():
        largest = max(pixels for pixels, _ in members)
        representative = next(path for pixels, path in members if pixels == largest)
        slides.append(DicomSlideSeries(series_uid, tuple(path for _, path in members), representative))
    return sorted(slides, key=lambda slide: slide.representative.name)


def _dicom_slide_instance(path: Path) -> tuple[str, int] | None:
    """(Series Instance UID, total pixel matrix area) of a DICOM whole-slide instance, else None."""
    header = slide_instance_header(path, ["SeriesInstanceUID", "TotalPixelMatrixColumns", "TotalPixelMatrixRows"])
    series_uid = str(header.get("SeriesInstanceUID", "")) if header is not None else ""
    if not series_uid:
        return None
    area = int(header.get("TotalPixelMatrixColumns", 0) or 0) * int(header.get("TotalPixelMatrixRows", 0) or 0)
    return series_uid, area


def slide_instance_header(path: Path, tags: list[str]) -> Dataset | None:
    """The header (only `tags`, pixels never read) of a Part-10 DICOM whole-slide instance, else None.

    Only the file meta is parsed for other DICOM files; a damaged header is None too, so the file is
    not a companion: it stays a source and gets its own error.
    """
    try:
        with path.open("rb") as handle:
            if handle.read(132)[128:132] != b"DICM":
                return None
    except OSError:
        return None
    from pydicom.filereader import read_file_meta_info

    from mmbu.build.convert.dicom_io import read_header

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if str(read_file_meta_info(path).get("MediaStorageSOPClassUID", "")) != VL_WHOLE_SLIDE_MICROSCOPY:
                return None
            return read_header(path, specific_tags=tags, force=False)
    except Exception:  # noqa: BLE001 - see the docstring
        return None


def is_slide_companion(path: Path) -> bool:
    """True for the data folder of a MIRAX slide (`X/` beside `X.mrxs`) or of a cellSens image (`_X_/`
    beside `X.vsi`, holding its .ets pixel files): it belongs to that file."""
    if not path.is_dir():
        return False
    if path.with_name(path.name + ".mrxs").is_file():
        return True
    name = path.name
    return len(name) > 2 and name.startswith("_") and name.endswith("_") and path.with_name(name[1:-1] + ".vsi").is_file()


def _read_head(path: Path) -> bytes:
    try:
        with path.open("rb") as handle:
            return handle.read(HEADER_BYTES)
    except PermissionError:
        raise ConversionError(f"{path} cannot be read: permission denied") from None
    except IsADirectoryError:
        raise ConversionError(f"{path} is a directory") from None
    except OSError as error:
        raise ConversionError(f"{path} cannot be read: {error.strerror or error}") from None


def _nifti_version(head: bytes) -> str:
    """'NIfTI-1' / 'NIfTI-2' when the header's size field and magic match (either byte order)."""
    if len(head) >= 348:
        for order in "<>":
            if struct.unpack(order + "i", head[:4])[0] == 348 and head[344:348] in (b"n+1\x00", b"ni1\x00"):
                return "NIfTI-1"
    if len(head) >= 12:
        for order in "<>":
            if struct.unpack(order + "i", head[:4])[0] == 540 and head[4:8] in (b"n+2\x00", b"ni2\x00"):
                return "NIfTI-2"
    return ""


def _gunzip_head(path: Path) -> bytes:
    try:
        with gzip.open(path, "rb") as handle:
            return handle.read(HEADER_BYTES)
    except (OSError, EOFError, zlib.error):
        raise ConversionError(f"{path} is a gzip file that is corrupt or truncated") from None


def _refuse_non_images(path: Path, head: bytes) -> None:
    if head[:4] == b"PK\x03\x04":
        general_purpose_flags = struct.unpack("<H", head[6:8])[0]
        if general_purpose_flags & 0x1:
            raise ConversionError(f"{path} is an encrypted zip archive; it cannot be read without its password")
        raise ConversionError(f"{path} is a zip archive, not an image; extract it first")
    for magic, what in NOT_IMAGES:
        if head.startswith(magic):
            if magic == b"%PDF-" and _pdf_is_encrypted(path):
                raise ConversionError(f"{path} is an encrypted PDF document, not an image")
            raise ConversionError(f"{path} is {what}" + ("" if "," in what or ";" in what else ", not an image"))


def _pdf_is_encrypted(path: Path) -> bool:
    # The trailer of an encrypted PDF names an /Encrypt dictionary; it sits near the end.
    with path.open("rb") as handle:
        handle.seek(max(0, path.stat().st_size - 4096))
        return b"/Encrypt" in handle.read()


def _looks_like_dicom_without_preamble(head: bytes) -> bool:
    """A dataset starting with a plausible (group, element) tag: group 0x0002/0x0008 in either order."""
    if len(head) < 8:
        return False
    little_group = struct.unpack("<H", head[:2])[0]
    big_group = struct.unpack(">H", head[:2])[0]
    return little_group in (0x0002, 0x0008) or big_group in (0x0002, 0x0008)


def _identify_dicom(path: Path) -> Identified:
    """Read the header with pydicom (force=True tolerates a missing preamble/meta) and sanity-check it."""
    from pydicom.errors import InvalidDicomError

    from mmbu.build.convert.dicom_io import read_header

    try:
        dataset = read_header(path)  # a deflated header is inflated only as far as its pixel data
    except (InvalidDicomError, EOFError, OSError, ValueError, KeyError, TypeError) as error:
        raise ConversionError(f"{path} looks like DICOM but its header cannot be parsed ({error})") from None
    if not (dataset.get("SOPClassUID") or ("Rows" in dataset and "Columns" in dataset)):
        raise ConversionError(f"{path} is not a DICOM image: it has neither a SOP Class UID nor image dimensions")
    if str(dataset.get("SOPClassUID", "")) == VL_WHOLE_SLIDE_MICROSCOPY:
        return Identified("wsi", path, "dicom")
    return Identified("dicom", path, str(dataset.get("Modality", "")))


def _identify_tiff(path: Path) -> Identified:
    """OME-XML first (tifffile), then scanner vendors (openslide), then tiled pyramids, else plain TIFF."""
    import tifffile

    vendor = _openslide_vendor(path)
    try:
        with _quiet_tifffile(), tifffile.TiffFile(path) as tiff:
            if tiff.pages and TAG_OLYMPUS_SIS in tiff.pages.first.tags:
                return Identified("vsi", path, "Olympus cellSens VSI")
            if tiff.pages and tiff.is_ome:
                return Identified("ome-tiff", path, "OME-XML")
            if vendor in WSI_VENDORS or tiff.is_ndpi:
                return Identified("wsi", path, vendor or "hamamatsu")
            if not tiff.pages:
                raise ConversionError(f"{path} is a TIFF file without any readable image")
            first = tiff.pages.first
            first_pixels = int(first.imagewidth) * int(first.imagelength)
            pyramidal = len(tiff.series[0].levels) > 1 if tiff.series else False
    except ConversionError:
        raise
    except Exception as error:  # tifffile raises many types on damaged files
        if vendor in WSI_VENDORS:  # e.g. NDPI with 64-bit offsets that tifffile refuses
            return Identified("wsi", path, vendor)
        raise ConversionError(f"{path} is a TIFF file that cannot be parsed ({error})") from None
    if vendor == "generic-tiff" and (pyramidal or first_pixels > budget.current().max_pixels):
        # a tiled pyramid, or a single level too big to hold in memory: read by levels/tiles
        return Identified("wsi", path, "generic-tiff")
    return Identified("tiff", path, "TIFF")


@contextmanager
def _quiet_tifffile() -> Iterator[None]:
    """Silence tifffile's log messages and warnings while sniffing.

    tifffile logs the quirks it works around, e.g. "invalid offset to first page" for every NDPI
    (whose 64-bit offsets hide in extra bytes); with no logging configured Python prints them to
    stderr. Sniffing either decides a format or raises one readable ConversionError, so the messages
    would only be noise. The logger's level is restored afterwards.
    """
    logger = logging.getLogger("tifffile")
    previous = logger.level
    logger.setLevel(logging.CRITICAL + 1)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        logger.setLevel(previous)


def _openslide_vendor(path: Path) -> str | None:
    try:
        import openslide

        return openslide.OpenSlide.detect_format(str(path))
    except Exception:  # openslide unavailable or refusing the file: simply not a slide
        return None


def _pillow_format(path: Path) -> str:
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as image:
            return str(image.format or "")
    except Image.DecompressionBombError:
        return "oversized raster"  # the raster reader explains the pixel budget
    except (UnidentifiedImageError, OSError, ValueError):
        return ""
