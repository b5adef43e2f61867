"""Detached data files named in any spelling the readers accept (issue 32, point 1): MetaIO reads
`ElementDataFile` with `=` or `:`, after any number of comment lines; NrrdIO reads `data file` in any case
(`DATA FILE`, `DataFile`), LIST and `%d` patterns. Each pointing outside the header's folder is refused before
ITK opens anything; legitimate headers still read. Headers are written by SimpleITK, then edited."""
from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))

from factories_itk import write  # noqa: E402
from factories_volume import labels  # noqa: E402

from mmbu.build.convert.base import ConversionError, ConvertOptions  # noqa: E402
from mmbu.build.convert.detached_headers import HEADER_SCAN_LIMIT, check_data_files  # noqa: E402
from mmbu.build.convert.dispatch import read_image  # noqa: E402

MEGABYTE_OF_COMMENTS = "".join(f"Comment{i} = {'x' * 100}\n" for i in range(11_000))
MEGABYTE_OF_NRRD_COMMENTS = "".join(f"# {'x' * 100}\n" for i in range(11_000))


def _secret(folder: Path, size: int) -> Path:
    """A file outside the dataset, of the size the header needs, whose bytes must never become an image."""
    secret = folder.parent / "secret.raw"
    secret.write_bytes(bytes(range(256)) * (size // 256 + 1))
    return secret


def _edited(folder: Path, name: str, edit) -> Path:
    """A SimpleITK-written header `name` (with scan.raw beside it) edited by `edit`, and the secret beside the
    dataset's folder."""
    folder.mkdir(parents=True, exist_ok=True)
    header = write(folder / name, labels())
    _secret(folder, (folder / "scan.raw").stat().st_size)
    header.write_text(edit(header.read_text(encoding="latin-1")), encoding="latin-1")
    return header


def _metaimage(folder: Path, edit) -> Path:
    return _edited(folder, "scan.mhd", edit)


def _nrrd(folder: Path, edit) -> Path:
    return _edited(folder, "scan.nhdr", edit)


METAIMAGE_SPELLINGS = {
    "colon": lambda t: t.replace("ElementDataFile = scan.raw", "ElementDataFile: ../secret.raw"),
    "colon_equals": lambda t: t.replace("ElementDataFile = scan.raw", "ElementDataFile := ../secret.raw"),
    "absolute": lambda t: t.replace("ElementDataFile = scan.raw", "ElementDataFile =/etc/passwd"),
    "indented": lambda t: t.replace("ElementDataFile = scan.raw", "  ElementDataFile\t=\t../secret.raw  "),
    "after_a_megabyte": lambda t: t.replace("ElementDataFile", MEGABYTE_OF_COMMENTS + "ElementDataFile")
    .replace("= scan.raw", "= ../secret.raw"),
    "list": lambda t: t.replace("ElementDataFile = scan.raw", "ElementDataFile = LIST 3D\n../secret.raw"),
    "pattern": lambda t: t.replace("ElementDataFile = scan.raw", "ElementDataFile = ../secret%d.raw 1 1 1"),
    "carriage_returns": lambda t: t.replace("\nElementDataFile = scan.raw", "\rElementDataFile = ../secret.raw"),
    "gz_suffix_link": None,  # see below
}
NRRD_SPELLINGS = {
    "upper_case": lambda t: t.replace("data file: scan.raw", "DATA FILE: ../secret.raw"),
    "camel_case": lambda t: t.replace("data file: scan.raw", "DataFile: ../secret.raw"),
    "absolute": lambda t: t.replace("data file: scan.raw", "data file: /etc/passwd"),
    "after_a_megabyte": lambda t: t.replace("data file:", MEGABYTE_OF_NRRD_COMMENTS + "data file:")
    .replace("data file: scan.raw", "data file: ../secret.raw"),
    "list": lambda t: t.replace("data file: scan.raw", "data file: LIST\n../secret.raw"),
    "pattern": lambda t: t.replace("data file: scan.raw", "data file: ../secret%d.raw 1 1 1 3"),
    "with_spaces": lambda t: t.replace("data file: scan.raw", "data file: sub dir/../../secret.raw"),
}


@pytest.mark.parametrize("spelling", [k for k, v in METAIMAGE_SPELLINGS.items() if v])
def test_every_metaimage_spelling_of_an_outside_data_file_is_refused(tmp_path, spelling):
    header = _metaimage(tmp_path / "dataset", METAIMAGE_SPELLINGS[spelling])
    with pytest.raises(ConversionError, match=r"names the data file .* which lies outside the header's folder"):
        read_image(header, ConvertOptions())


@pytest.mark.parametrize("spelling", sorted(NRRD_SPELLINGS))
def test_every_nrrd_spelling_of_an_outside_data_file_is_refused(tmp_path, spelling):
    header = _nrrd(tmp_path / "dataset", NRRD_SPELLINGS[spelling])
    with pytest.raises(ConversionError, match=r"names the data file .* which lies outside the header's folder"):
        read_image(header, ConvertOptions())


def test_a_data_file_reached_through_the_readers_gz_suffix_or_a_link_is_refused(tmp_path):
    folder = tmp_path / "dataset"
    header = _metaimage(folder, lambda t: t.replace("ElementDataFile = scan.raw", "ElementDataFile = data"))
    (folder / "data.gz").symlink_to(tmp_path / "secret.raw")  # MetaImage::Read tries data, data.gz, data.Z
    with pytest.raises(ConversionError, match="'data.gz', which lies outside"):
        read_image(header, ConvertOptions())


@pytest.mark.parametrize("kind", ["metaimage", "nrrd"])
def test_a_header_whose_end_is_past_the_scan_limit_is_refused(tmp_path, kind):
    padding = "".join(f"C{i} = {'x' * 200}\n" for i in range(HEADER_SCAN_LIMIT // 200))
    if kind == "metaimage":
        header = _metaimage(tmp_path / "d", lambda t: t.replace("ElementDataFile", padding + "ElementDataFile"))
        expected = "has no ElementDataFile field within its first 16,777,216 bytes"
    else:
        header = _nrrd(tmp_path / "d", lambda t: t.replace("data file:", padding.replace(" = ", ":= ") + "data file:"))
        expected = "has no end of header (an empty line) within its first 16,777,216 bytes"
    with pytest.raises(ConversionError, match=re.escape(expected)):
        read_image(header, ConvertOptions())


@pytest.mark.parametrize("edit", [
    lambda t: t.replace("ElementDataFile = scan.raw", "ElementDataFile = ./scan.raw"),
    lambda t: t.replace("\n", "\r\n"),
    lambda t: t.replace("ElementDataFile", MEGABYTE_OF_COMMENTS + "ElementDataFile"),
])
def test_legitimate_metaimage_headers_still_read_pixel_for_pixel(tmp_path, edit):
    folder = tmp_path / "dataset"
    header = _metaimage(folder, edit)
    reference = read_image(write(tmp_path / "ref.mha", labels()), ConvertOptions(as_mask=True)).pixels
    np.testing.assert_array_equal(read_image(header, ConvertOptions(as_mask=True)).pixels, reference)


def test_legitimate_nrrd_lists_and_spellings_still_read(tmp_path):
    folder = tmp_path / "dataset"
    header = _nrrd(folder, lambda t: t.replace("data file: scan.raw", "DATA FILE: ./scan.raw"))
    assert check_data_files(header, "nrrd").data_files == ["./scan.raw"]
    reference = read_image(write(tmp_path / "ref.nrrd", labels()), ConvertOptions(as_mask=True)).pixels
    np.testing.assert_array_equal(read_image(header, ConvertOptions(as_mask=True)).pixels, reference)
