"""`ConvertOptions.square_pixels` / `mmbu convert --no-square-pixels`: turning the square-pixel correction off.

With the switch off the PNG is the stored grid, pixel for pixel: the same bytes a file without any
pixel-shape attribute gives, and the record says the correction was turned off (with what the header
said), so a sidecar read later does not look like a missed correction. The default stays on.
"""
import json
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from PIL import Image

sys.path.insert(0, str(Path(__file__).parent))
import factories_dicom as fd  # noqa: E402
from factories_volume import ANISOTROPIC_MM, SHAPE, mask_of_marker, phantom, write_nifti  # noqa: E402

from mmbu.build.convert.base import SQUARE_PIXELS_OFF_NOTE, ConvertOptions  # noqa: E402
from mmbu.build.convert.batch import convert_paths  # noqa: E402
from mmbu.build.convert.dispatch import read_image  # noqa: E402
from mmbu.cli import cli  # noqa: E402
from mmbu.core.geometry import ConversionGeometry  # noqa: E402

ROWS, COLUMNS = 40, 80
OFF = ConvertOptions(square_pixels=False)


def _disc(rows: int = ROWS, columns: int = COLUMNS) -> np.ndarray:
    """A round object on 2:1 pixels: stored as an ellipse twice as wide as tall."""
    yy, xx = np.mgrid[0:rows, 0:columns]
    return ((yy + 0.5 - rows / 2) / 15) ** 2 + ((xx + 0.5 - columns / 2) / 30) ** 2 <= 1


def _ct(path: Path, attributes: dict, stored: np.ndarray | None = None) -> Path:
    stored = np.where(_disc(), 1000, 0).astype(np.uint16) if stored is None else stored
    ds = fd.ct_dataset(stored, slope=1.0, intercept=0.0, window=(500.0, 1000.0), attributes=attributes)
    return fd.save(ds, path)


def _ramp_disc() -> np.ndarray:
    """The disc filled with a ramp along the columns: any resampling would change grey levels, not only the shape."""
    return (_disc() * np.tile(np.linspace(200, 1000, COLUMNS).round(), (ROWS, 1))).astype(np.uint16)


def test_off_keeps_the_stored_grid_exactly(tmp_path):
    stored = _ramp_disc()
    tall = read_image(_ct(tmp_path / "us.dcm", {"PixelSpacing": [1.0, 0.5]}, stored), OFF)
    plain = read_image(_ct(tmp_path / "plain.dcm", {}, stored))  # no pixel shape: never resampled
    assert tall.pixels.shape == (ROWS, COLUMNS)
    assert np.array_equal(tall.pixels, plain.pixels)
    assert np.array_equal(tall.pixels > 0, stored > 0)
    assert tall.params["square_pixels"] == {
        "source": "PixelSpacing", "spacing_mm": [1.0, 0.5], "from_size": [COLUMNS, ROWS],
        "applied": False, "note": SQUARE_PIXELS_OFF_NOTE,
    }
    assert tall.geometry == ConversionGeometry.kept((COLUMNS, ROWS))  # nothing resampled
    default = read_image(tmp_path / "us.dcm")  # the default is unchanged
    assert default.pixels.shape == (80, 80) and default.params["square_pixels"]["applied"] is True


def test_off_keeps_the_stored_labels_and_rgb_exactly(tmp_path):
    labels = (_disc() * 3).astype(np.uint16)
    ds = fd.ct_dataset(labels, slope=1.0, intercept=0.0, window=None, attributes={"PixelSpacing": [1.0, 0.5]})
    mask = read_image(fd.save(ds, tmp_path / "mask.dcm"), ConvertOptions(as_mask=True, square_pixels=False))
    assert np.array_equal(mask.pixels, labels.astype(np.uint8))

    rgb = np.zeros((ROWS, COLUMNS, 3), np.uint8)
    rgb[_disc()] = (220, 40, 30)
    converted = read_image(fd.write_rgb(tmp_path / "us_rgb.dcm", rgb, attributes={"PixelAspectRatio": [2, 1]}), OFF)
    assert np.array_equal(converted.pixels, rgb)
    assert converted.params["square_pixels"]["ratio"] == [2.0, 1.0]
    assert converted.params["square_pixels"]["note"] == SQUARE_PIXELS_OFF_NOTE


@pytest.mark.parametrize("attributes", [{}, {"PixelSpacing": [0.0, 0.5]}, {"PixelSpacing": [0.5, 0.5]}])
def test_off_says_so_whatever_the_header_holds(tmp_path, attributes):
    # no shape, an unusable one, a square one: nothing is resampled and the reason is the switch
    converted = read_image(_ct(tmp_path / "x.dcm", attributes), OFF)
    assert converted.pixels.shape == (ROWS, COLUMNS)
    assert converted.params["square_pixels"]["applied"] is False
    assert converted.params["square_pixels"]["note"] == SQUARE_PIXELS_OFF_NOTE


def test_off_with_max_size_fits_the_stored_grid(tmp_path):
    (record,) = convert_paths([_ct(tmp_path / "us.dcm", {"PixelSpacing": [1.0, 0.5]})], tmp_path / "out",
                              ConvertOptions(max_size=40, square_pixels=False))
    assert record["status"] == "ok"
    assert (record["width"], record["height"]) == (40, 20)  # 80 x 40 halved, the 2:1 shape kept
    assert record["params"]["geometry"] == ConversionGeometry.scaled((COLUMNS, ROWS), (40, 20), "lanczos").to_json()


def test_nifti_thick_slices_keep_their_stored_grid_when_off(tmp_path):
    volume = phantom()
    image_path = write_nifti(tmp_path / "img.nii.gz", volume, "LPS", zooms=ANISOTROPIC_MM)
    mask_path = write_nifti(tmp_path / "msk.nii.gz", mask_of_marker(volume), "LPS", zooms=ANISOTROPIC_MM)
    coronal = dict(axis=1, slice=SHAPE[1] - 5)  # rows along z (2.5 mm), columns along x (1 mm)
    stretched = read_image(image_path, ConvertOptions(**coronal))
    assert stretched.pixels.shape == (40, SHAPE[0])  # the default, unchanged: 16 rows x 2.5
    image = read_image(image_path, ConvertOptions(square_pixels=False, **coronal))
    mask = read_image(mask_path, ConvertOptions(as_mask=True, square_pixels=False, **coronal))
    assert image.pixels.shape == mask.pixels.shape == (SHAPE[2], SHAPE[0])
    canonical_mask = mask_of_marker(volume)
    expected = np.take(canonical_mask, SHAPE[1] - 5, axis=1).T[::-1, ::-1]  # radiological coronal view
    assert np.array_equal(mask.pixels, expected)
    assert image.params["square_pixels_from"] is None
    assert image.params["square_pixels"] == {"applied": False, "note": SQUARE_PIXELS_OFF_NOTE}
    assert image.params["pixel_spacing_mm"] == [2.5, 1.0]  # what the header says is still recorded


def _run(*args):
    return CliRunner().invoke(cli, ["convert", *map(str, args)])


def test_the_cli_flag_turns_it_off_and_the_default_keeps_it_on(tmp_path):
    source = _ct(tmp_path / "us.dcm", {"PixelSpacing": [1.0, 0.5]})
    runs = (([], (80, 80), True), (["--no-square-pixels"], (COLUMNS, ROWS), False), (["--square-pixels"], (80, 80), True))
    for number, (flags, size, applied) in enumerate(runs):
        out = tmp_path / f"out{number}"
        result = _run(source, "--out", out, *flags)
        assert result.exit_code == 0, result.output
        with Image.open(out / "us.png") as png:
            assert png.size == size
        (record,) = [json.loads(line) for line in (out / "convert-report.jsonl").read_text().splitlines()]
        assert record["params"]["square_pixels"]["applied"] is applied
    help_text = " ".join(_run("--help").output.split())  # click wraps the help text
    assert "--square-pixels / --no-square-pixels" in help_text and "keeps the stored grid" in help_text
