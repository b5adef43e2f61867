"""Bounded reading of DICOM files: what a hostile or damaged file may cost before it is refused.

pydicom inflates a whole *deflated* dataset (Deflated Explicit VR Little Endian) in one
`zlib.decompress` call, even to read its header: a 1 MB file can inflate to gigabytes. And a decoder
allocates whatever Rows × Columns a header declares. So every DICOM read in the build goes through here:

* `read_header` parses the header only; a deflated dataset is inflated incrementally and only as far
  as its Pixel Data element (at most `HEADER_INFLATE_LIMIT` bytes).
* `check_pixel_budget` refuses a frame that declares more pixels (or decoded bytes) than the budget
  every reader shares (`mmbu.core.budget`: by default Pillow's `Image.MAX_IMAGE_PIXELS`), so the same
  limit holds for every raster format. Whole slides take the WSI path and are not affected.
* `read_deflated_dataset` inflates a deflated file to at most its declared size plus its header.
* `check_pixel_data_complete` finds pixel data that ends early (a damaged download): a defined-length
  element longer than the file, or an encapsulated sequence without its delimiter.
"""
from __future__ import annotations

import io
import os
import warnings
import zlib
from pathlib import Path

from pydicom import Dataset, dcmread
from pydicom.filereader import read_dataset, read_file_meta_info
from pydicom.pixels.utils import get_expected_length
from pydicom.tag import BaseTag, Tag
from pydicom.uid import DeflatedExplicitVRLittleEndian

from mmbu.build.convert.base import ConversionError
from mmbu.core import budget

HEADER_INFLATE_LIMIT = 16 * 1024 * 1024  # a header larger than this inside a deflated file is refused
_CHUNK = 1024 * 1024
_PIXEL_TAGS = {0x7FE00010, 0x7FE00009, 0x7FE00008}  # Pixel Data, Double/Float Pixel Data


def pixel_budget() -> int:
    """Largest number of pixels one decoded frame may have (`mmbu.core.budget`'s `max_pixels`)."""
    return budget.current().max_pixels


def is_deflated(path: Path) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            meta = read_file_meta_info(path)
    except Exception:  # noqa: BLE001 - no Part-10 file meta: not a deflated Part-10 file
        return False
    return meta.get("TransferSyntaxUID") == DeflatedExplicitVRLittleEndian


def read_header(path: Path, specific_tags: list | None = None, *, force: bool = True) -> Dataset:
    """The header of a DICOM file without its pixel data, inflating a deflated dataset only that far.

    Raises pydicom's or ConversionError's exceptions for unreadable headers; callers decide whether an
    unreadable header is an error (the converter) or an unknown value (layouts' header metadata).
    """
    path = Path(path)
    if not is_deflated(path):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # header quirks pydicom copes with
            return dcmread(path, force=force, stop_before_pixels=True, specific_tags=specific_tags)
    meta, start = _file_meta_and_dataset_offset(path)
    inflated, finished = _inflate(path, start, HEADER_INFLATE_LIMIT)
    try:
        dataset, reached_pixels = _parse(inflated, stop_at_pixels=True, specific_tags=specific_tags)
    except Exception as error:  # noqa: BLE001 - pydicom raises many types on damaged data
        if finished:
            raise ConversionError(f"{path} has a deflated DICOM header that cannot be parsed ({error})") from None
        reached_pixels, dataset = False, None
    if not (finished or reached_pixels):
        raise ConversionError(
            f"{path} is a deflated DICOM file whose header inflates to more than "
            f"{HEADER_INFLATE_LIMIT // (1024 * 1024)} MiB before any pixel data; it is refused as a decompression bomb"
        )
    dataset.file_meta = meta
    return dataset


def check_pixel_budget(header: Dataset, path: Path) -> None:
    """Refuse, before any decoding, a frame whose declared size exceeds `pixel_budget()`."""
    limit = pixel_budget()
    try:
        rows, columns = int(header.get("Rows") or 0), int(header.get("Columns") or 0)
        samples = int(header.get("SamplesPerPixel") or 1)
        bits = int(header.get("BitsAllocated") or 8)
    except (TypeError, ValueError):
        raise ConversionError(f"{path} declares image dimensions that are not numbers") from None
    if rows * columns > limit:
        raise ConversionError(
            f"{path} declares {columns}×{rows} pixels per frame ({rows * columns:,}), more than the "
            f"{limit:,}-pixel budget ({budget.SETTINGS['max_pixels']}); it is refused before decoding"
        )
    if samples not in (1, 3, 4):
        raise ConversionError(f"{path} declares {samples} samples per pixel, which no image has")
    try:  # what the decoded frame holds: BitsAllocated per sample
        budget.check_plane(path, columns, rows, channels=samples, sample_bytes=max(1, -(-bits // 8)),
                           kind="DICOM frame")
    except budget.OverBudget as error:
        raise ConversionError(str(error)) from None


def read_deflated_dataset(path: Path) -> Dataset:
    """The whole dataset of a deflated file, inflated to no more than its header and declared pixels."""
    header = read_header(path)
    check_pixel_budget(header, path)
    declared = _declared_pixel_bytes(header)
    meta, start = _file_meta_and_dataset_offset(path)
    limit = HEADER_INFLATE_LIMIT + declared + 64 * 1024  # slack: trailing elements after the pixels
    inflated, finished = _inflate(path, start, limit)
    if not finished:
        if len(inflated) >= limit:
            raise ConversionError(
                f"{path} inflates to more than its declared {declared:,} bytes of pixel data; it is refused as a "
                "decompression bomb"
            )
        raise ConversionError(f"{path} is truncated: its deflated data stream ends early (a damaged download?)")
    dataset, _ = _parse(inflated, stop_at_pixels=False)
    dataset.file_meta = meta
    return dataset


def check_pixel_data_complete(path: Path, header: Dataset) -> None:
    """Raise when the pixel data of a (non-deflated) file ends before the file says it does.

    pydicom decodes one frame by seeking to it, so a file cut after its first frames still decodes
    them; but a truncated file is a damaged download (its other frames and trailing elements are lost),
    so it is an error naming the file, whichever frame was asked for.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # deferred values are skipped by seeking: the scan costs no memory, even for large files
        dataset = dcmread(path, force=True, defer_size=1024)
    element = next((dataset.get_item(keyword) for keyword in ("PixelData", "FloatPixelData", "DoubleFloatPixelData")
                    if keyword in dataset), None)
    if element is None:
        # pydicom stops at end of file inside an unterminated element and drops it
        raise ConversionError(f"{path} is truncated: its pixel data ends before the end the file declares "
                              "(for compressed data: no sequence delimiter after the fragments); a damaged download?")
    if isinstance(element.value, (bytes, bytearray)):  # read in full: its bytes are what the file holds
        length, tell = len(element.value), None
    else:  # deferred: skipped by seeking, so it may extend past the end of the file
        length, tell = getattr(element, "length", None), getattr(element, "value_tell", None)
    if length is None or length == 0xFFFFFFFF:
        return  # an encapsulated sequence that pydicom read to its delimiter is whole
    size = os.path.getsize(path)
    if tell is not None and tell + length > size:
        raise ConversionError(f"{path} is truncated: its pixel data declares {length:,} bytes but the file ends "
                              f"{tell + length - size:,} bytes short (a damaged download?)")
    syntax = getattr(header, "file_meta", Dataset()).get("TransferSyntaxUID")
    if syntax is not None and not syntax.is_compressed and length < (expected := _declared_pixel_bytes(header)):
        raise ConversionError(f"{path} has pixel data that is truncated or corrupt ({length:,} bytes where its "
                              f"dimensions need {expected:,})")


def _declared_pixel_bytes(header: Dataset) -> int:
    try:
        return int(get_expected_length(header, unit="bytes"))
    except Exception:  # noqa: BLE001 - missing attributes: budget by the grid alone
        rows, columns = int(header.get("Rows") or 0), int(header.get("Columns") or 0)
        frames = int(header.get("NumberOfFrames") or 1)
        return rows * columns * frames * int(header.get("SamplesPerPixel") or 1) * 2


def _file_meta_and_dataset_offset(path: Path) -> tuple[Dataset, int]:
    """The file meta and the byte offset where the (deflated) dataset starts (PS3.10 §7.1)."""
    meta = read_file_meta_info(path)
    group_length = meta.get("FileMetaInformationGroupLength")
    if group_length is None:
        raise ConversionError(f"{path} is deflated but its file meta has no group length, so the data cannot be found")
    return meta, 128 + 4 + 12 + int(group_length)


def _inflate(path: Path, start: int, limit: int) -> tuple[bytes, bool]:
    """Raw-deflate stream from `start`, inflated to at most `limit` bytes; (bytes, stream finished)."""
    inflater = zlib.decompressobj(-zlib.MAX_WBITS)
    out = bytearray()
    with path.open("rb") as handle:
        handle.seek(start)
        while len(out) < limit and not inflater.eof:
            chunk = inflater.unconsumed_tail or handle.read(_CHUNK)
            if not chunk:
                break
            try:
                out += inflater.decompress(chunk, limit - len(out))
            except zlib.error as error:
                raise ConversionError(f"{path} has a deflated data stream that is corrupt ({error})") from None
    return bytes(out), inflater.eof


def _parse(data: bytes, *, stop_at_pixels: bool, specific_tags: list | None = None) -> tuple[Dataset, bool]:
    """Parse an inflated (explicit VR little endian) dataset; also whether the Pixel Data tag was reached."""
    reached = []

    def at_pixels(tag: BaseTag, vr: str | None, length: int) -> bool:
        if tag in _PIXEL_TAGS:
            reached.append(tag)
            return True
        return False

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dataset = read_dataset(io.BytesIO(data), is_implicit_VR=False, is_little_endian=True,
                               stop_when=at_pixels if stop_at_pixels else None,
                               specific_tags=[Tag(tag) for tag in specific_tags] if specific_tags else None)
    dataset.set_original_encoding(False, True)
    return dataset, bool(reached)
