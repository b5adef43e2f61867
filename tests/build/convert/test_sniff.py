"""Format identification from content: the extension never decides."""
import gzip
import io
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
import tifffile
from PIL import Image

sys.path.insert(0, str(Path(__file__).parent))
import factories_dicom as fd  # noqa: E402
import factories_raster as fr  # noqa: E402
import factories_slide as fs  # noqa: E402
import factories_volume as fv  # noqa: E402

from mmbu.build.convert.base import ConversionError  # noqa: E402
from mmbu.build.convert.sniff import identify  # noqa: E402

FIXTURES = Path(__file__).parent / "fixtures"


def test_dicom_with_and_without_preamble(tmp_path):
    ds = fd.ct_dataset(fd.ct_ramp(8, 8))
    with_meta = fd.save(ds, tmp_path / "a.dcm")
    assert identify(with_meta).format == "dicom"
    raw = fd.save(fd.ct_dataset(fd.ct_ramp(8, 8)), tmp_path / "b.bin", file_meta=False)
    assert raw.read_bytes()[128:132] != b"DICM"
    assert identify(raw).format == "dicom"


def test_dicom_whole_slide_goes_to_the_slide_reader(tmp_path):
    assert identify(fd.write_wsi_header(tmp_path / "slide.dcm")).format == "wsi"
    assert identify(FIXTURES / "boxes_0.dcm").format == "wsi"


@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.parametrize("suffix", [".nii", ".nii.gz"])
def test_nifti_plain_and_gzip(tmp_path, version, suffix):
    path = fv.write_nifti(tmp_path / f"v{suffix}", fv.phantom(), version=version)
    identified = identify(path)
    assert identified.format == "nifti"
    assert identified.detail.startswith(f"NIfTI-{version}")


def test_tiff_flavours(tmp_path):
    plain = tmp_path / "plain.tif"
    tifffile.imwrite(plain, np.zeros((32, 32), np.uint16))
    assert identify(plain).format == "tiff"
    ome = fs.write_ome_tiff(tmp_path / "cells.ome.tif", np.zeros((2, 64, 64), np.uint16), ["DAPI", "GFP"], None)
    assert identify(ome).format == "ome-tiff"
    pyramid = fs.write_pyramid_tiff(tmp_path / "pyramid.tif", size=(1024, 768), levels=3)
    assert identify(pyramid) .format == "wsi" and identify(pyramid).detail == "generic-tiff"
    assert identify(FIXTURES / "boxes.tiff").format == "wsi"
    assert identify(FIXTURES / "small.svs").detail == "aperio"


def test_tiled_but_small_single_level_tiff_is_plain_tiff(tmp_path):
    path = tmp_path / "tiled.tif"
    tifffile.imwrite(path, np.zeros((256, 256, 3), np.uint8), tile=(128, 128), photometric="rgb")
    assert identify(path).format == "tiff"


def test_ndpi_and_mrxs_are_slides(tmp_path):
    ndpi = fs.write_ndpi(tmp_path / "scan.ndpi", fs.quadrant_image(64))
    assert identify(ndpi).format == "wsi" and identify(ndpi).detail == "hamamatsu"
    slide_dir = tmp_path / "case"
    slide_dir.mkdir()
    slide_file = fs.write_mrxs(slide_dir)
    assert identify(slide_file).format == "wsi"
    identified = identify(slide_dir)  # a folder holding one MRXS slide is that slide
    assert identified.format == "wsi" and identified.path == slide_file


def test_mrxs_without_its_data_folder_is_explained(tmp_path):
    lonely = tmp_path / "lonely.mrxs"
    lonely.write_bytes(b"")
    with pytest.raises(ConversionError, match=r"lonely\.mrxs .* data folder lonely/"):
        identify(lonely)


@pytest.mark.parametrize("pillow_format, expected", [("JPEG", "JPEG"), ("PNG", "PNG"), ("BMP", "BMP"), ("GIF", "GIF"),
                                                     ("WEBP", "WebP")])
def test_raster_magic(tmp_path, pillow_format, expected):
    path = tmp_path / "picture.dat"  # the name says nothing
    Image.new("RGB", (8, 8), (10, 20, 30)).save(path, format=pillow_format)
    identified = identify(path)
    assert identified.format == "raster" and identified.detail == expected


def test_wrong_extension_is_read_by_content(tmp_path):
    dicom_named_png = fd.write_ct(tmp_path / "scan.png", fd.ct_ramp(8, 8))
    assert identify(dicom_named_png).format == "dicom"
    png_named_dcm = tmp_path / "photo.dcm"
    Image.new("L", (4, 4)).save(png_named_dcm, format="PNG")
    assert identify(png_named_dcm).format == "raster"


def test_empty_unknown_and_missing_files(tmp_path):
    empty = tmp_path / "empty.dcm"
    empty.touch()
    with pytest.raises(ConversionError, match=r"empty\.dcm is empty \(0 bytes\)"):
        identify(empty)
    unknown = tmp_path / "notes.txt"
    unknown.write_text("patient list\n" * 20)
    with pytest.raises(ConversionError, match=r"notes\.txt is not an image format this converter knows"):
        identify(unknown)
    with pytest.raises(ConversionError, match="does not exist"):
        identify(tmp_path / "gone.png")


def test_archives_and_documents_are_refused_with_what_they_are(tmp_path):
    archive = tmp_path / "images.zip"
    with zipfile.ZipFile(archive, "w") as bundle:
        bundle.writestr("a.png", b"x")
    with pytest.raises(ConversionError, match=r"images\.zip is a zip archive, not an image; extract it first"):
        identify(archive)
    encrypted = fr.write_encrypted_zip(tmp_path / "secret.zip")
    with pytest.raises(ConversionError, match=r"secret\.zip is an encrypted zip archive"):
        identify(encrypted)
    pdf = tmp_path / "report.pdf"
    Image.new("RGB", (8, 8)).save(pdf, format="PDF")
    with pytest.raises(ConversionError, match=r"report\.pdf is a PDF document, not an image"):
        identify(pdf)
    encrypted_pdf = fr.write_encrypted_pdf(tmp_path / "locked.pdf")
    with pytest.raises(ConversionError, match=r"locked\.pdf is an encrypted PDF document"):
        identify(encrypted_pdf)


def test_gzip_that_is_not_nifti(tmp_path):
    path = tmp_path / "table.csv.gz"
    with gzip.open(path, "wb") as handle:
        handle.write(b"a,b\n1,2\n" * 100)
    with pytest.raises(ConversionError, match="gzip-compressed file that does not hold a NIfTI image"):
        identify(path)


def test_directory_without_a_slide_is_not_a_source(tmp_path):
    with pytest.raises(ConversionError, match="directory without a multi-file slide"):
        identify(tmp_path)


def test_pillow_identifies_the_rest(tmp_path):
    path = tmp_path / "scan.tga"
    buffer = io.BytesIO()
    Image.new("RGB", (4, 4), (1, 2, 3)).save(buffer, format="TGA")
    path.write_bytes(buffer.getvalue())
    assert identify(path).format == "raster"


def test_sniffing_an_ndpi_prints_nothing(tmp_path):
    """tifffile logs "invalid offset to first page" for NDPI files; a fresh interpreter (no logging
    configured, like the `mmbu` command) must print nothing while sniffing, and the tifffile logger
    must be left as it was."""
    import subprocess

    ndpi = fs.write_ndpi(tmp_path / "scan.ndpi", fs.quadrant_image(64))
    script = (
        "import logging, sys; from mmbu.build.convert.sniff import identify; "
        "logger = logging.getLogger('tifffile'); logger.setLevel(logging.INFO); "
        "print(identify(sys.argv[1]).detail, logging.getLevelName(logger.level))"
    )
    result = subprocess.run([sys.executable, "-c", script, str(ndpi)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["hamamatsu", "INFO"]
    assert result.stderr == ""
