"""Raster conversion against independent references: the EXIF orientation table, numpy percentiles,
Pillow's own decoders, and the decompression-bomb guard inside worker processes."""
from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageOps

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent / "golden"))
import make_dicom_golden as golden  # noqa: E402

from mmbu.build.convert.base import ConvertOptions  # noqa: E402
from mmbu.build.convert.batch import convert_paths  # noqa: E402
from mmbu.build.convert.dispatch import read_image  # noqa: E402

# EXIF 2.3 Orientation: how the stored rows/columns must be turned to stand upright, written with
# numpy alone (row 0 of the stored image is ... side of the scene; column 0 is ... side)
EXIF_UPRIGHT = {
    1: lambda a: a,                          # top / left
    2: lambda a: a[:, ::-1],                 # top / right: mirrored left-right
    3: lambda a: a[::-1, ::-1],              # bottom / right: turned 180°
    4: lambda a: a[::-1, :],                 # bottom / left: mirrored top-bottom
    5: lambda a: a.transpose(1, 0, 2),       # left / top: transposed
    6: lambda a: np.rot90(a, -1),            # right / top: turn 90° clockwise
    7: lambda a: a[::-1, ::-1].transpose(1, 0, 2),  # right / bottom: transversed
    8: lambda a: np.rot90(a, 1),             # left / bottom: turn 90° anticlockwise
}


def _marker_image(height: int = 12, width: int = 20) -> np.ndarray:
    """Asymmetric: a red block top-left, a green pixel column on the right edge, a blue bottom row."""
    rgb = np.full((height, width, 3), 128, np.uint8)
    rgb[0:3, 0:5] = (230, 20, 20)
    rgb[:, -1] = (20, 210, 20)
    rgb[-1, 6:] = (20, 20, 220)
    return rgb


def _save_with_orientation(path: Path, rgb: np.ndarray, orientation: int, **save) -> Path:
    exif = Image.Exif()
    exif[0x0112] = orientation
    Image.fromarray(rgb).save(path, exif=exif.tobytes(), **save)
    return path


@pytest.mark.parametrize("orientation", range(1, 9))
@pytest.mark.parametrize(("suffix", "save"), [(".png", {}), (".webp", {"lossless": True})])
def test_every_exif_orientation_stands_upright_exactly(tmp_path, orientation, suffix, save):
    stored = _marker_image()
    path = _save_with_orientation(tmp_path / f"o{orientation}{suffix}", stored, orientation, **save)
    converted = read_image(path)
    expected = EXIF_UPRIGHT[orientation](stored)
    with Image.open(path) as image:  # Pillow's own reading of the same tag agrees with the table
        assert np.array_equal(np.asarray(ImageOps.exif_transpose(image).convert("RGB")), expected)
    assert converted.pixels.shape == expected.shape
    assert np.array_equal(converted.pixels, expected), f"orientation {orientation}: {converted.params}"


@pytest.mark.parametrize("orientation", range(1, 9))
def test_every_exif_orientation_in_a_camera_jpeg(tmp_path, orientation):
    stored = _marker_image(24, 40).repeat(2, axis=0).repeat(2, axis=1)  # blocks of 2x2: JPEG keeps them
    path = _save_with_orientation(tmp_path / f"o{orientation}.jpg", stored, orientation, quality=98,
                                  subsampling=0)
    converted = read_image(path)
    expected = EXIF_UPRIGHT[orientation](stored).astype(int)
    assert converted.pixels.shape == expected.shape
    assert np.abs(converted.pixels.astype(int) - expected).mean() < 3


def test_a_mask_is_turned_by_the_same_exif_orientation_as_its_image(tmp_path):
    stored = _marker_image()
    labels = (stored[..., 0] > 200).astype(np.uint8)  # 1 on the red block
    image_path = _save_with_orientation(tmp_path / "photo.png", stored, 6)
    exif = Image.Exif()
    exif[0x0112] = 6
    Image.fromarray(labels, mode="L").save(tmp_path / "mask.png", exif=exif.tobytes())
    image = read_image(image_path).pixels
    mask = read_image(tmp_path / "mask.png", ConvertOptions(as_mask=True)).pixels
    assert mask.shape == image.shape[:2]
    assert np.array_equal(mask == 1, image[..., 0] > 200)


def test_twelve_bit_png_windowed_like_numpy_percentiles(tmp_path):
    values = np.random.default_rng(3).integers(0, 4096, (40, 50)).astype(np.uint16)
    values[5:10, 5:10] = 4095
    Image.fromarray(values).save(tmp_path / "twelve.png")
    converted = read_image(tmp_path / "twelve.png")
    lo, hi = np.percentile(values.astype(np.float64), [0.5, 99.5])
    expected = np.clip(np.rint((values - lo) * 255.0 / (hi - lo)), 0, 255)
    assert np.abs(converted.pixels.astype(int) - expected).max() <= 1
    assert converted.pixels.mean() > 100  # what `>> 8` would have made nearly black (mean ~8)


def test_cmyk_jpeg_comes_back_in_the_right_colours(tmp_path):
    rgb = np.zeros((16, 48, 3), np.uint8)
    rgb[:, :16], rgb[:, 16:32], rgb[:, 32:] = (220, 30, 30), (30, 200, 40), (240, 240, 240)
    Image.fromarray(rgb).convert("CMYK").save(tmp_path / "cmyk.jpg", quality=98)
    with Image.open(tmp_path / "cmyk.jpg") as check:
        assert check.mode == "CMYK"
    converted = read_image(tmp_path / "cmyk.jpg")
    assert converted.mode == "RGB"
    for block, colour in ((slice(2, 14), (220, 30, 30)), (slice(18, 30), (30, 200, 40)), (slice(34, 46), (240, 240, 240))):
        assert np.abs(converted.pixels[2:14, block].mean(axis=(0, 1)) - colour).max() < 12


def test_decompression_bomb_guard_holds_in_worker_processes(tmp_path):
    # over twice Pillow's default limit (89,478,485): refused at open, in each worker, with the real limit
    side = 13_400
    Image.new("1", (side, side)).save(tmp_path / "bomb.png")
    small = tmp_path / "small.png"
    Image.fromarray(_marker_image()).save(small)
    records = convert_paths([tmp_path / "bomb.png", small], tmp_path / "out", jobs=2)
    by_name = {Path(record["source"]).name: record for record in records}
    assert by_name["small.png"]["status"] == "ok"
    assert by_name["bomb.png"]["status"] == "error"
    assert "decompression-bomb limit" in by_name["bomb.png"]["error"]
    assert not (tmp_path / "out" / "bomb.png").exists()


@pytest.mark.parametrize("disguise", ["scan.png", "scan.jpg", "scan"])
def test_a_dicom_under_a_raster_name_is_converted_as_dicom_like_dcmtk(tmp_path, disguise):
    case = json.loads((golden.OUT / "cases.json").read_text())["cases"]["ct_file_window"]
    disguised = tmp_path / disguise
    shutil.copyfile(golden.input_path(case["input"]), disguised)
    converted = read_image(disguised)
    assert converted.format == "dicom"
    with Image.open(golden.OUT / "ct_file_window.png") as image:
        assert np.abs(converted.pixels.astype(int) - np.asarray(image)).max() <= 1


@pytest.mark.parametrize("mode", ["L", "RGB"])
def test_a_colour_key_is_transparent_like_pillows_alpha_says(tmp_path, mode):
    stored = np.zeros((8, 8, 3), np.uint8)
    stored[:4] = (200, 10, 10)
    image = Image.fromarray(stored if mode == "RGB" else stored[..., 0])
    key = (0, 0, 0) if mode == "RGB" else 0
    image.save(tmp_path / "keyed.png", transparency=key)
    with Image.open(tmp_path / "keyed.png") as check:  # Pillow's own reading: the key becomes alpha 0
        alpha = np.asarray(check.convert("RGBA"))[..., 3]
    converted = read_image(tmp_path / "keyed.png")
    white = np.full(converted.pixels.shape[2:], 255)
    assert np.array_equal(converted.pixels[alpha == 0], np.broadcast_to(white, converted.pixels[alpha == 0].shape))
    assert np.array_equal(converted.pixels[:4], (stored if mode == "RGB" else stored[..., 0])[:4])
