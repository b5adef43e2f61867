"""`mmbu convert` on DICOM against dcmtk's `dcmj2pnm`, the reference renderer, as an external oracle.

dcmtk is not installed for users or CI, so its PNGs were rendered once and committed
(`golden/dicom/`, made by `golden/make_dicom_golden.py`; see `golden/PROVENANCE.md`). Each case runs our
whole path — sniff, read, window, write the PNG — through `convert_paths` and compares the PNG a user
would get with dcmtk's: grayscale within one grey level (dcmtk truncates where we round), YCbCr within
two (dcmtk's integer YCbCr formula), decoded JPEG within the decoders' rounding. Non-square pixels
(`dcmj2pnm +a +Sxf 1`, which replicates rows where we use LANCZOS) are compared by size, thresholded
shape and our grey levels against dcmtk's stored-grid rendering put through the named filter.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

GOLDEN = Path(__file__).parent / "golden"
sys.path.insert(0, str(GOLDEN))
import make_dicom_golden as golden  # noqa: E402  (input paths and options exactly as the goldens were made)

from mmbu.build.convert.batch import convert_paths  # noqa: E402
from mmbu.build.convert.dicom import voi_lut_output_bits  # noqa: E402

CASES = json.loads((golden.OUT / "cases.json").read_text())["cases"]
GREY_LEVEL_CASES = sorted(case for case, spec in CASES.items() if "max_abs" in spec["tolerance"])
RESAMPLED_CASES = sorted(case for case, spec in CASES.items() if "resampled_from" in spec["tolerance"])


def _golden(case: str) -> np.ndarray:
    with Image.open(golden.OUT / f"{case}.png") as image:
        return np.asarray(image)


def _convert(source: Path, options_fields: dict, out_dir: Path) -> tuple[np.ndarray, dict]:
    (record,) = convert_paths([source], out_dir, golden.our_options(options_fields))
    assert record["status"] == "ok", record["error"]
    with Image.open(record["output"]) as image:
        return np.asarray(image), record


def test_every_case_has_a_tolerance_model():
    assert sorted(GREY_LEVEL_CASES + RESAMPLED_CASES) == sorted(CASES)


@pytest.mark.parametrize("case", GREY_LEVEL_CASES)
def test_png_matches_dcmtk(case, tmp_path):
    spec = CASES[case]
    ours, record = _convert(golden.input_path(spec["input"]), spec["options"], tmp_path)
    reference = _golden(case)
    assert ours.shape == reference.shape, f"{case}: our PNG is {ours.shape}, dcmtk's ({spec['dcmtk']}) {reference.shape}"
    difference = np.abs(ours.astype(np.int16) - reference.astype(np.int16))
    tolerance = spec["tolerance"]
    worst = np.unravel_index(int(difference.argmax()), difference.shape)
    assert difference.max() <= tolerance["max_abs"], (
        f"{case}: {difference.max()} grey levels from dcmtk at {worst} (ours {ours[worst]}, dcmtk {reference[worst]}); "
        f"dcmtk ran `{spec['dcmtk']}`, we recorded {record['params'].get('window')}"
    )
    assert difference.mean() <= tolerance["mean_abs"]
    if spec["our_window"] is not None:
        # the golden was rendered with the window we recorded when it was made: it must not drift
        recorded = record["params"]["window"]
        for key in ("lo", "hi", "center", "width"):
            if key in spec["our_window"]:
                assert recorded[key] == pytest.approx(spec["our_window"][key]), (case, key)


@pytest.mark.parametrize("case", RESAMPLED_CASES)
def test_squared_pixels_match_dcmtk_in_size_and_shape_and_differ_only_by_the_filter(case, tmp_path):
    spec = CASES[case]
    tolerance = spec["tolerance"]
    ours, record = _convert(golden.input_path(spec["input"]), spec["options"], tmp_path)
    reference = _golden(case)
    assert ours.shape == reference.shape, f"{case}: our PNG is {ours.shape}, dcmtk's ({spec['dcmtk']}) {reference.shape}"
    assert record["params"]["square_pixels"]["applied"] is True
    threshold = tolerance["threshold"]
    mismatch = np.count_nonzero((ours > threshold) != (reference > threshold))
    assert mismatch <= tolerance["max_threshold_mismatch"], f"{case}: {mismatch} pixels on the other side of {threshold}"
    # dcmtk's own rendering of the stored grid, through the filter we name: only then may grey levels be compared
    stored_grid = _golden(tolerance["resampled_from"])
    assert tolerance["filter"] == record["params"]["square_pixels"]["resample"] == "lanczos"
    filtered = np.asarray(Image.fromarray(stored_grid).resize(ours.shape[::-1], Image.Resampling.LANCZOS))
    difference = np.abs(ours.astype(np.int16) - filtered.astype(np.int16))
    assert difference.max() <= tolerance["filtered_max_abs"], f"{case}: {difference.max()} grey levels from LANCZOS(dcmtk)"
    assert difference.mean() <= tolerance["filtered_mean_abs"]


def test_dcmtk_itself_shows_monochrome1_with_identity_uninverted():
    # the golden is the complement of the same stored ramp and window without a shape (dcmtk's two renderings)
    identity, plain = _golden("cr_mono1_identity").astype(int), _golden("cr_mono1_window").astype(int)
    assert np.abs(identity - (255 - plain)).max() <= 1
    assert identity[0, 0] == 0 and identity[0, -1] == 255  # low stored values dark, as stored


def test_ybr_full_comes_back_within_one_level_of_the_original_rgb(tmp_path):
    # dcmtk itself sits up to 3 levels away here; the original colours are the sharper oracle
    ours, record = _convert(golden.input_path("rgb_ybr_full"), {}, tmp_path)
    assert np.abs(ours.astype(int) - golden._colour_scene().astype(int)).max() <= 1
    assert record["params"]["colour"] == "YBR_FULL converted to RGB by pydicom on decoding"


def test_subsampled_jpeg_keeps_its_marker_blocks_in_place(tmp_path):
    ours, _ = _convert(golden.input_path("rgb_jpeg_ybr_full_422"), {}, tmp_path)
    red_block, green_block = ours[8:16, 8:20].mean(axis=(0, 1)), ours[32:40, 44:56].mean(axis=(0, 1))
    assert red_block[0] > 200 and red_block[1] < 60 and red_block[2] < 70
    assert green_block[1] > 180 and green_block[0] < 50 and green_block[2] < 90


@pytest.mark.parametrize(
    ("declared", "lut_max", "bits"),
    [(16, 65535, 16), (16, 4095, 12), (12, 3500, 12), (8, 150, 8), (16, 35000, 16), (12, 1000, 10)],
)
def test_voi_lut_depth_follows_the_descriptor_unless_overstated(declared, lut_max, bits):
    assert voi_lut_output_bits(declared, lut_max) == bits


def test_a_voi_lut_inside_part_of_its_range_is_not_stretched(tmp_path):
    # 500..3500 of a 12-bit LUT: the darkest grey is 500/4095 of white, as dcmtk shows it
    ours, record = _convert(golden.input_path("dx_voi_lut_12bit_partial"), {}, tmp_path)
    assert record["params"]["window"]["lut_output_range"] == [0.0, 4095.0]
    assert 29 <= ours.min() <= 32 and 216 <= ours.max() <= 219


JPEG_CASES = sorted(case for case, spec in CASES.items() if spec["tolerance"] == golden.LOSSY_COLOUR)


@pytest.mark.parametrize("plugin", ["gdcm", "pillow"])
@pytest.mark.parametrize("case", JPEG_CASES)
def test_each_jpeg_decoder_matches_dcmtk_without_converting_colour_twice(case, plugin, tmp_path, monkeypatch):
    # users without gdcm get Pillow: its YCbCr handling must land on the same colours
    from mmbu.build.convert import dicom

    monkeypatch.setattr(dicom, "DECODER_PREFERENCE", (plugin,))
    spec = CASES[case]
    ours, record = _convert(golden.input_path(spec["input"]), spec["options"], tmp_path)
    assert record["params"]["decoder"] == plugin
    with Image.open(golden.OUT / f"{case}.png") as image:
        difference = np.abs(ours.astype(int) - np.asarray(image).astype(int))
    assert difference.max() <= spec["tolerance"]["max_abs"] and difference.mean() <= spec["tolerance"]["mean_abs"]


def test_a_collapsed_percentile_window_says_it_fell_back_to_min_max(tmp_path):
    _ours, record = _convert(golden.input_path("ct_sparse_min_max"), {}, tmp_path)
    assert record["params"]["window"] == {"lo": -1024.0, "hi": 1976.0, "source": "min-max (percentile 0.5-99.5 coincide)"}
