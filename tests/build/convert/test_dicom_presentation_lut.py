"""MONOCHROME1/2 × Presentation LUT Shape: which windowed images are inverted, and why that is recorded.

The rule (see `mmbu.build.convert.dicom.presentation_inversion` for the sources): an explicit
Presentation LUT Shape decides — INVERSE inverts, IDENTITY does not — and only without one does
MONOCHROME1 invert. The expected polarities below are the ones dcmtk's `dcmj2pnm` 3.6.7 rendered for
files written by these same factories (`dcmj2pnm +on +Wi 1`, checked by hand on 2026-11-29; dcmtk is
not installed for the tests): first/last pixel of the ramp 0/255 (IDENTITY and MONOCHROME2 without a
shape) and 255/0 (INVERSE, and MONOCHROME1 without a shape).
"""
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
import factories_dicom as fd  # noqa: E402

from mmbu.build.convert.base import ConvertOptions  # noqa: E402
from mmbu.build.convert.batch import convert_paths  # noqa: E402
from mmbu.build.convert.dicom import presentation_inversion  # noqa: E402
from mmbu.build.convert.dispatch import read_image  # noqa: E402

# stored 0..4095 across the columns; the file window 2048/4096 maps 0 to black and 4095 to white
RAMP = np.tile(np.linspace(0, 4095, 64).round().astype(np.uint16), (8, 1))
WINDOW = (2048.0, 4096.0)

CASES = [
    # photometric, shape, inverted, reason recorded
    ("MONOCHROME1", None, True, "MONOCHROME1"),
    ("MONOCHROME1", "INVERSE", True, "MONOCHROME1 with PresentationLUTShape INVERSE (the same inversion, applied once)"),
    ("MONOCHROME1", "IDENTITY", False,
     "not inverted: PresentationLUTShape IDENTITY overrides MONOCHROME1 (as dcmtk, highdicom)"),
    ("MONOCHROME2", None, False, "not inverted: MONOCHROME2"),
    ("MONOCHROME2", "IDENTITY", False, "not inverted: MONOCHROME2 with PresentationLUTShape IDENTITY"),
    ("MONOCHROME2", "INVERSE", True, "PresentationLUTShape INVERSE"),
]


def _write(path: Path, photometric: str, shape: str | None, **kwargs) -> Path:
    attributes = {"PresentationLUTShape": shape} if shape else None
    ds = fd.ct_dataset(RAMP, slope=1.0, intercept=0.0, window=WINDOW, photometric=photometric,
                       attributes=attributes, **kwargs)
    return fd.save(ds, path)


@pytest.mark.parametrize(("photometric", "shape", "inverted", "reason"), CASES)
def test_polarity_follows_the_shape_then_the_photometric_interpretation(tmp_path, photometric, shape, inverted, reason):
    converted = read_image(_write(tmp_path / "ramp.dcm", photometric, shape))
    row = converted.pixels[0].astype(int)
    if inverted:
        assert (row[0], row[-1]) == (255, 0) and np.all(np.diff(row) <= 0)
    else:
        assert (row[0], row[-1]) == (0, 255) and np.all(np.diff(row) >= 0)
    assert converted.params["inverted"] is inverted
    assert converted.params["inverted_because"] == reason


@pytest.mark.parametrize(("photometric", "shape", "inverted", "reason"), CASES)
def test_inversion_is_exactly_the_complement_of_the_uninverted_rendering(tmp_path, photometric, shape, inverted, reason):
    # same stored values and window, once through the IDENTITY path: the two differ by 255 - v exactly
    plain = read_image(_write(tmp_path / "plain.dcm", "MONOCHROME2", None)).pixels
    ours = read_image(_write(tmp_path / "case.dcm", photometric, shape)).pixels
    expected = 255 - plain if inverted else plain
    assert np.array_equal(ours, expected)


def test_a_cr_with_identity_and_no_window_is_shown_as_stored_after_the_percentile_window(tmp_path):
    stored = np.full((32, 32), 100, np.uint16)
    stored[8:24, 8:24] = 4000
    identity = read_image(fd.write_monochrome1(tmp_path / "cr_identity.dcm", stored, presentation_shape="IDENTITY"))
    bare = read_image(fd.write_monochrome1(tmp_path / "cr.dcm", stored))
    assert identity.pixels[16, 16] == 255 and identity.pixels[0, 0] == 0  # high stored value is bright
    assert np.array_equal(identity.pixels, 255 - bare.pixels)
    assert identity.params["window"] == bare.params["window"]  # only the last stage differs


def test_a_cr_with_identity_and_a_voi_lut_is_not_inverted(tmp_path):
    lut = np.linspace(0, 4095, 4096).round().astype(np.uint16)
    path = fd.write_with_voi_lut(tmp_path / "lut.dcm", RAMP, lut, lut_bits=12)
    from pydicom import dcmread

    ds = dcmread(path)
    ds.PhotometricInterpretation = "MONOCHROME1"
    ds.PresentationLUTShape = "IDENTITY"
    converted = read_image(fd.save(ds, tmp_path / "lut_mono1_identity.dcm"))
    assert converted.params["window"]["source"] == "file VOI LUT"
    assert converted.pixels[0, 0] == 0 and converted.pixels[0, -1] == 255
    assert converted.params["inverted"] is False


def test_a_printer_shape_is_ignored_and_says_so(tmp_path):
    # LIN OD is defined for hardcopy only; like dcmtk, fall back to the photometric interpretation
    converted = read_image(fd.write_monochrome1(tmp_path / "linod.dcm", RAMP, window=WINDOW, presentation_shape="LIN OD"))
    assert converted.pixels[0, 0] == 255 and converted.pixels[0, -1] == 0
    assert converted.params["inverted_because"] == (
        "MONOCHROME1 (PresentationLUTShape 'LIN OD' is not a softcopy shape and was ignored)"
    )


def test_the_decision_reaches_the_conversion_report(tmp_path):
    source = _write(tmp_path / "mono1_identity.dcm", "MONOCHROME1", "IDENTITY")
    (record,) = convert_paths([source], tmp_path / "out", ConvertOptions())
    assert record["status"] == "ok"
    assert record["params"]["inverted"] is False
    assert "IDENTITY overrides MONOCHROME1" in record["params"]["inverted_because"]


@pytest.mark.parametrize(("photometric", "shape", "inverted", "reason"), CASES)
def test_the_rule_alone(photometric, shape, inverted, reason):
    assert presentation_inversion(photometric, shape) == (inverted, reason)
    # header padding and case as pydicom may hand them over
    if shape:
        assert presentation_inversion(photometric, f" {shape.lower()} ") == (inverted, reason)
