"""MetaImage and NRRD → one radiological slice, checked against SimpleITK's own DICOMOrient path."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

sys.path.insert(0, str(Path(__file__).parent))

from factories_itk import IDENTITY, oracle_view, permuted, rotation_z, write  # noqa: E402
from factories_volume import SHAPE, labels, mask_of_marker, phantom  # noqa: E402

from mmbu.build.convert.base import ConversionError, ConvertOptions  # noqa: E402
from mmbu.build.convert.batch import convert_paths, walk_sources  # noqa: E402
from mmbu.build.convert.dispatch import read_image  # noqa: E402
from mmbu.build.convert.sniff import identify  # noqa: E402

FIXTURES = Path(__file__).parent / "fixtures" / "nrrd"
SUFFIXES = [".mha", ".mhd", ".nrrd", ".nhdr"]
DIRECTIONS = {
    "identity-LPS": IDENTITY,
    "flipped-RAS": permuted((0, 1, 2), (-1, -1, 1)),
    "flipped-z": permuted((0, 1, 2), (1, 1, -1)),
    "permuted-sagittal": permuted((1, 2, 0), (1, -1, 1)),
    "permuted-coronal": permuted((0, 2, 1), (-1, -1, 1)),
    "oblique-20deg": rotation_z(20.0),
}


def stored_labels() -> np.ndarray:
    """Distinct label values (x, y, z) so any wrong flip, transpose or slice changes the picture."""
    return labels()


@pytest.mark.parametrize("suffix", SUFFIXES)
@pytest.mark.parametrize("name", list(DIRECTIONS))
@pytest.mark.parametrize("axis", [0, 1, 2])
def test_every_direction_matches_simpleitk_dicomorient(tmp_path, suffix, name, axis):
    path = write(tmp_path / f"v{suffix}", stored_labels(), direction=DIRECTIONS[name])
    converted = read_image(path, ConvertOptions(as_mask=True, axis=axis))
    middle = converted.params["slice_index"]
    np.testing.assert_array_equal(converted.pixels, oracle_view(path, axis, middle))
    assert converted.format == ("metaimage" if suffix in (".mha", ".mhd") else "nrrd")
    assert converted.params["axcodes_after"] == "RAS" and converted.params["display"] == "radiological"


def test_oblique_direction_is_recorded_not_resampled(tmp_path):
    path = write(tmp_path / "oblique.mha", stored_labels(), direction=rotation_z(20.0))
    params = read_image(path, ConvertOptions(as_mask=True)).params
    assert params["oblique_degrees"] == pytest.approx(20.0, abs=0.01)


def test_lps_axial_marker_right_anterior_appears_top_left(tmp_path):
    canonical = phantom()  # x toward the patient's right, y anterior, z superior
    stored = canonical[::-1, ::-1, :]  # identity directions in ITK mean x toward left, y posterior
    path = write(tmp_path / "lps.nrrd", stored)
    pixels = read_image(path, ConvertOptions(axis=2, slice=SHAPE[2] - 5)).pixels
    rows, cols = np.nonzero(pixels == 255)
    assert rows.size and rows.max() < SHAPE[1] // 2 and cols.max() < SHAPE[0] // 2


def test_thick_slices_become_square_pixels_for_image_and_mask_alike(tmp_path):
    volume = phantom()[::-1, ::-1, :]  # canonical phantom stored with identity (LPS) directions
    geometry = dict(spacing=(1.0, 1.5, 2.5))
    image = read_image(write(tmp_path / "img.mha", volume, **geometry), ConvertOptions(axis=1, slice=SHAPE[1] - 5))
    mask = read_image(write(tmp_path / "msk.mha", mask_of_marker(volume), **geometry),
                      ConvertOptions(as_mask=True, axis=1, slice=SHAPE[1] - 5))
    assert image.params["pixel_spacing_mm"] == [2.5, 1.0]
    assert image.params["square_pixels_from"] == [SHAPE[2], SHAPE[0]]
    assert image.pixels.shape == mask.pixels.shape == (40, SHAPE[0])
    assert image.geometry.stored_size == (SHAPE[0], SHAPE[2]) and image.geometry.output_size == (SHAPE[0], 40)
    assert image.pixels[mask.pixels == 1].mean() > 200 > image.pixels[mask.pixels == 0].mean() + 100
    kept = read_image(tmp_path / "img.mha", ConvertOptions(axis=1, square_pixels=False))
    assert kept.pixels.shape == (SHAPE[2], SHAPE[0]) and kept.params["square_pixels"]["applied"] is False


def test_mask_max_area_picks_the_slice_from_a_nrrd_mask(tmp_path):
    volume = phantom()[::-1, ::-1, ::-1]  # stored with x left, y posterior, z inferior ("flipped-z")
    mask = mask_of_marker(volume)
    image_path = write(tmp_path / "img.nhdr", volume, direction=DIRECTIONS["flipped-z"])
    mask_path = write(tmp_path / "img_mask.nhdr", mask, direction=DIRECTIONS["flipped-z"])
    image = read_image(image_path, ConvertOptions(slice="mask_max_area", slice_mask=mask_path))
    converted_mask = read_image(mask_path, ConvertOptions(as_mask=True, slice="mask_max_area"))
    assert image.params["slice_choice"] == "mask_max_area"
    assert SHAPE[2] - 6 <= image.params["slice_index"] < SHAPE[2] - 3  # the marker's canonical slices
    assert converted_mask.params["slice_index"] == image.params["slice_index"]
    assert (image.pixels[converted_mask.pixels == 1] == 255).all()


def test_a_mask_on_another_grid_is_refused(tmp_path):
    image_path = write(tmp_path / "img.mha", phantom())
    mask_path = write(tmp_path / "m.mha", mask_of_marker(phantom())[:, :, :8])
    with pytest.raises(ConversionError, match="does not share the grid"):
        read_image(image_path, ConvertOptions(slice="mask_max_area", slice_mask=mask_path))


def test_rgb_vector_pixels_stay_colour(tmp_path):
    rgb = np.zeros((12, 10, 3), np.uint8)  # a 2-D (x, y) RGB image as ultrasound exports store it
    rgb[2, 3] = (255, 0, 0)
    path = write(tmp_path / "rgb.mha", rgb, vector=True)
    converted = read_image(path, ConvertOptions())
    assert converted.mode == "RGB" and converted.pixels.shape == (10, 12, 3)
    assert tuple(converted.pixels[3, 2]) == (255, 0, 0)  # a 2-D image with identity directions is shown as stored
    assert converted.params["components"] == 3


def test_4d_volume_takes_the_chosen_time_point(tmp_path):
    series = np.stack([stored_labels(), (stored_labels() // 2)], axis=-1)  # (x, y, z, t)
    path = write(tmp_path / "cine.mha", series)
    first = read_image(path, ConvertOptions(as_mask=True, frame=0))
    second = read_image(path, ConvertOptions(as_mask=True, frame=1))
    assert second.params["volume_index"] == 1 and second.params["n_volumes"] == 2
    np.testing.assert_array_equal(second.pixels, first.pixels // 2)
    with pytest.raises(ConversionError, match="outside 0..1"):
        read_image(path, ConvertOptions(frame=5))


def test_real_pynrrd_ball_attached_and_detached(tmp_path):
    attached = read_image(FIXTURES / "BallBinary30x30x30_gz.nrrd", ConvertOptions(as_mask=False))
    detached = read_image(FIXTURES / "BallBinary30x30x30.nhdr", ConvertOptions())
    np.testing.assert_array_equal(attached.pixels, detached.pixels)
    assert detached.params["data_files"] == ["BallBinary30x30x30.raw"]
    assert attached.params["axcodes_before"] == "LPS" and attached.pixels.shape == (30, 30)
    assert np.count_nonzero(attached.pixels) == 716  # the ball's widest (middle) axial slice, 0/257 in the file
    np.testing.assert_array_equal(attached.pixels > 0, oracle_view(FIXTURES / "BallBinary30x30x30.nhdr", 2, 15) > 0)


def test_content_decides_the_format_not_the_name(tmp_path):
    path = write(tmp_path / "scan.mha", stored_labels())
    renamed = path.rename(tmp_path / "scan.dat")
    assert identify(renamed).format == "metaimage"
    nrrd = write(tmp_path / "scan.nrrd", stored_labels()).rename(tmp_path / "scan.bin")
    assert identify(nrrd).format == "nrrd"
    np.testing.assert_array_equal(read_image(renamed, ConvertOptions(as_mask=True)).pixels,
                                  read_image(nrrd, ConvertOptions(as_mask=True)).pixels)


def _bad_inputs(folder: Path) -> dict[str, str]:
    """Each broken header and the words its one-sentence error must contain."""
    folder.mkdir()
    missing = write(folder / "missing.mhd", stored_labels())
    (folder / "missing.raw").unlink()
    short = write(folder / "short.mhd", stored_labels())
    raw = folder / "short.raw"
    raw.write_bytes(raw.read_bytes()[:1000])
    outside = write(folder / "outside.nhdr", stored_labels())
    text = outside.read_text().replace("data file: outside.raw", "data file: ../secret.raw")
    outside.write_text(text)
    (folder.parent / "secret.raw").write_bytes(b"\0" * 8000)
    absolute = write(folder / "absolute.mhd", stored_labels())
    absolute.write_text(absolute.read_text().replace("ElementDataFile = absolute.raw", "ElementDataFile = /etc/passwd"))
    truncated = write(folder / "truncated.mha", stored_labels())
    truncated.write_bytes(truncated.read_bytes()[:-500])
    return {
        "missing.mhd": "does not exist",
        "short.mhd": "truncated",
        "outside.nhdr": "outside the header's folder",
        "absolute.mhd": "outside the header's folder",
        "truncated.mha": "truncated",
    }


def test_bad_headers_and_data_files_fail_one_by_one_and_the_batch_goes_on(tmp_path):
    expected = _bad_inputs(tmp_path / "in")
    good = write(tmp_path / "in" / "good.nrrd", stored_labels())
    out = tmp_path / "out"
    records = {Path(r["source"]).name: r for r in convert_paths([tmp_path / "in"], out)}
    assert records["good.nrrd"]["status"] == "ok" and (out / "good.png").exists()
    for name, words in expected.items():
        record = records[name]
        assert record["status"] == "error" and name in record["error"] and words in record["error"], record
        assert "\n" not in record["error"]
        assert not (out / f"{Path(name).stem}.png").exists()
    assert not any(p.name.endswith(".tmp") for p in out.iterdir())
    assert good.exists()


def test_walk_skips_detached_data_files(tmp_path):
    write(tmp_path / "a.mhd", stored_labels())
    write(tmp_path / "b.nhdr", stored_labels())
    write(tmp_path / "c.mhd", stored_labels(), compress=True)
    names = sorted(p.name for p in walk_sources([tmp_path]))
    assert names == ["a.mhd", "b.nhdr", "c.mhd"]


def test_cli_report_line_records_the_geometry(tmp_path):
    from click.testing import CliRunner

    from mmbu.cli import cli

    path = write(tmp_path / "ct.mha", phantom().astype(np.int16), spacing=(0.7, 0.7, 3.0))
    result = CliRunner().invoke(cli, ["convert", str(path), "--out", str(tmp_path / "out"), "--axis", "1"])
    assert result.exit_code == 0, result.output
    record = json.loads((tmp_path / "out" / "convert-report.jsonl").read_text())
    assert record["format"] == "metaimage" and record["params"]["axis_name"] == "coronal"
    assert record["params"]["pixel_spacing_mm"] == [3.0, 0.7]
    png = Image.open(tmp_path / "out" / "ct.png")
    assert png.mode == "L" and png.size == (SHAPE[0], round(SHAPE[2] * 3.0 / 0.7))
