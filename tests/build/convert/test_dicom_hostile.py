"""Hostile and damaged DICOM files: decompression bombs are refused before they cost memory, and a
file whose pixel data ends early is a damaged download, not a conversion.

The bombs are real Part-10 files: pydicom writes the file meta and the header elements, and the
deflated stream (PS3.5 A.5: raw deflate of the explicit-VR little-endian dataset) is produced by zlib
chunk by chunk, so a test never holds the gigabytes the file claims.
"""
from __future__ import annotations

import io
import json
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest
from pydicom.filebase import DicomBytesIO
from pydicom.filewriter import write_dataset, write_file_meta_info
from pydicom.uid import DeflatedExplicitVRLittleEndian, ExplicitVRLittleEndian, JPEGBaseline8Bit

from mmbu.build.convert.base import ConversionError, ConvertOptions
from mmbu.build.convert.dicom_io import pixel_budget, read_header
from mmbu.build.convert.dispatch import read_image
from mmbu.build.layouts.files import header_metadata, image_size

sys.path.insert(0, str(Path(__file__).parent))
import factories_dicom as fd  # noqa: E402


def deflated_bomb(path: Path, rows: int, columns: int, pixel_bytes: int, bits: int = 8, level: int = 9) -> Path:
    """A deflated DICOM declaring rows × columns and carrying `pixel_bytes` zero bytes of Pixel Data (deflate `level`:
    9 packs zeros ~4× tighter than 1, at ~3× its CPU time)."""
    ds = fd.base_dataset()
    ds.file_meta.TransferSyntaxUID = DeflatedExplicitVRLittleEndian
    ds.Rows, ds.Columns = rows, columns
    ds.SamplesPerPixel, ds.PhotometricInterpretation = 1, "MONOCHROME2"
    ds.BitsAllocated = ds.BitsStored = bits
    ds.HighBit, ds.PixelRepresentation = bits - 1, 0
    header = DicomBytesIO()
    header.is_little_endian, header.is_implicit_VR = True, False
    write_dataset(header, ds)
    meta = DicomBytesIO()
    meta.is_little_endian, meta.is_implicit_VR = True, False
    write_file_meta_info(meta, ds.file_meta, enforce_standard=True)
    # (7FE0,0010) OB, explicit VR: tag, 'OB', two reserved bytes, 4-byte length
    element = (0x7FE0).to_bytes(2, "little") + (0x0010).to_bytes(2, "little") + b"OB\0\0" + pixel_bytes.to_bytes(4, "little")
    deflater = zlib.compressobj(level, zlib.DEFLATED, -zlib.MAX_WBITS)
    with path.open("wb") as out:
        out.write(b"\0" * 128 + b"DICM" + meta.getvalue())
        out.write(deflater.compress(header.getvalue() + element))
        zeros, left = bytes(8 * 1024 * 1024), pixel_bytes
        while left:
            out.write(deflater.compress(zeros[: min(left, len(zeros))]))
            left -= min(left, len(zeros))
        out.write(deflater.flush())
    return path


def test_a_deflated_file_claiming_a_huge_image_is_refused_by_its_declared_size(tmp_path):
    path = deflated_bomb(tmp_path / "bomb.dcm", 16384, 16384, 16384 * 16384)
    assert path.stat().st_size < 1_000_000  # 256 MiB of pixels in well under 1 MB
    with pytest.raises(ConversionError) as error:
        read_image(path, ConvertOptions())
    message = str(error.value)
    assert str(path) in message and "16384×16384" in message and "budget" in message
    assert f"{pixel_budget():,}" in message


def test_a_deflated_file_that_inflates_past_its_declared_size_is_refused(tmp_path):
    # declares 64×64 but its stream inflates to 64 MiB of "pixel data"
    path = deflated_bomb(tmp_path / "liar.dcm", 64, 64, 64 * 1024 * 1024)
    with pytest.raises(ConversionError, match="inflates to more than its declared 4,096 bytes"):
        read_image(path, ConvertOptions())


def test_an_honest_deflated_file_still_converts(tmp_path):
    ds = fd.base_dataset()
    pixels = (np.arange(64 * 48, dtype=np.uint16).reshape(48, 64) * 7) % 4096
    _set_grayscale(ds, pixels)
    path = fd.save(ds, tmp_path / "deflated.dcm", DeflatedExplicitVRLittleEndian)
    converted = read_image(path, ConvertOptions())
    assert (converted.width, converted.height) == (64, 48)


def _set_grayscale(ds, pixels: np.ndarray) -> None:
    ds.Rows, ds.Columns = pixels.shape
    ds.SamplesPerPixel, ds.PhotometricInterpretation = 1, "MONOCHROME2"
    ds.BitsAllocated, ds.BitsStored, ds.HighBit, ds.PixelRepresentation = 16, 12, 11, 0
    ds.PixelData = pixels.astype("<u2").tobytes()


@pytest.fixture(scope="module")
def gigabyte_bomb(tmp_path_factory) -> Path:
    """1 GiB of declared and carried pixels (32768² 8-bit) in under 5 MB."""
    return deflated_bomb(tmp_path_factory.mktemp("bomb") / "bomb.dcm", 32768, 32768, 32768 * 32768, level=1)


def test_header_readers_of_the_layouts_do_not_inflate_a_bomb(gigabyte_bomb):
    path = gigabyte_bomb  # the layouts' header readers must stop at the Pixel Data tag
    assert image_size(path) == (32768, 32768)
    assert header_metadata(path) == {"dicom.Modality": "OT"}
    assert int(read_header(path).Rows) == 32768


def test_the_whole_convert_command_stays_small_on_a_gigabyte_bomb(gigabyte_bomb, tmp_path):
    """Peak memory of `mmbu convert` on a 1 GiB (inflated) bomb, measured in its own process."""
    path = gigabyte_bomb
    out = tmp_path / "out"
    # a fresh probe process runs the command, so RUSAGE_CHILDREN covers that command's process tree only
    probe = (
        "import resource, subprocess, sys\n"
        "code = subprocess.run([sys.executable, '-m', 'mmbu', *sys.argv[1:]], capture_output=True).returncode\n"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, code)\n"
    )
    result = subprocess.run([sys.executable, "-c", probe, "convert", str(path), "--out", str(out)],
                            capture_output=True, text=True, timeout=120)
    peak_kib, exit_code = (int(value) for value in result.stdout.split())
    assert exit_code == 1
    assert peak_kib < 600 * 1024, f"peak {peak_kib // 1024} MiB"  # the bomb inflated is 1024 MiB
    report = [json.loads(line) for line in (out / "convert-report.jsonl").read_text().splitlines()]
    assert report[0]["status"] == "error" and "budget" in report[0]["error"]
    assert not list(out.glob("*.png"))


def test_a_native_file_declaring_more_pixels_than_the_budget_is_refused_before_decoding(tmp_path):
    ds = fd.base_dataset()
    _set_grayscale(ds, np.zeros((4, 4), np.uint16))
    ds.Rows, ds.Columns = 20000, 20000  # the 32 bytes of pixel data are not what a decoder would allocate
    path = fd.save(ds, tmp_path / "claims.dcm")
    with pytest.raises(ConversionError, match=r"20000×20000 pixels per frame .* budget"):
        read_image(path, ConvertOptions())


def _jpeg_multiframe(path: Path, frames: int = 3) -> Path:
    """A three-frame JPEG baseline file (one fragment per frame, Pillow-encoded frames)."""
    from PIL import Image
    from pydicom.encaps import encapsulate

    ds = fd.base_dataset()
    ds.file_meta.TransferSyntaxUID = JPEGBaseline8Bit
    ds.Rows, ds.Columns, ds.NumberOfFrames = 32, 48, frames
    ds.SamplesPerPixel, ds.PhotometricInterpretation = 1, "MONOCHROME2"
    ds.BitsAllocated = ds.BitsStored = 8
    ds.HighBit, ds.PixelRepresentation = 7, 0
    encoded = []
    for index in range(frames):
        buffer = io.BytesIO()
        Image.fromarray(np.full((32, 48), 40 * (index + 1), np.uint8)).save(buffer, "JPEG", quality=95)
        encoded.append(buffer.getvalue())
    ds.PixelData = encapsulate(encoded)
    ds["PixelData"].VR = "OB"
    return fd.save(ds, path)


def test_encapsulated_pixel_data_cut_before_its_delimiter_is_a_damaged_file_even_if_frame_0_is_intact(tmp_path):
    whole = _jpeg_multiframe(tmp_path / "whole.dcm")
    assert read_image(whole, ConvertOptions(frame=0)).height == 32
    data = whole.read_bytes()
    cut = tmp_path / "cut.dcm"
    cut.write_bytes(data[: len(data) - 8 - len(data) // 6])  # the last frame and the delimiter are gone
    with pytest.raises(ConversionError) as error:
        read_image(cut, ConvertOptions(frame=0))
    assert str(cut) in str(error.value) and "truncated" in str(error.value)


def test_native_pixel_data_shorter_than_declared_is_a_damaged_file(tmp_path):
    ds = fd.base_dataset()
    _set_grayscale(ds, np.arange(64 * 64, dtype=np.uint16).reshape(64, 64))
    whole = fd.save(ds, tmp_path / "whole.dcm", ExplicitVRLittleEndian)
    cut = tmp_path / "cut.dcm"
    cut.write_bytes(whole.read_bytes()[:-1000])
    with pytest.raises(ConversionError, match=r"cut.dcm has pixel data that is truncated or corrupt "
                                              r"\(7,192 bytes where its dimensions need 8,192\)"):
        read_image(cut, ConvertOptions())
    assert read_image(whole, ConvertOptions()).width == 64
