"""Raster images through Pillow: orientation, colour management, modes, transparency, limits."""
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageCms

sys.path.insert(0, str(Path(__file__).parent))
import factories_raster as fr  # noqa: E402

from mmbu.build.convert.base import ConversionError, ConvertOptions  # noqa: E402
from mmbu.build.convert.dispatch import read_image  # noqa: E402
from mmbu.core.geometry import ConversionGeometry, Transform  # noqa: E402


def test_exif_orientation_is_applied(tmp_path):
    # stored 40 wide x 20 high with a red marker top-left; orientation 6 = rotate 90° clockwise to view
    path = fr.write_jpeg_with_orientation(tmp_path / "photo.jpg", orientation=6)
    converted = read_image(path)
    assert (converted.height, converted.width) == (40, 20)
    assert converted.params["exif_orientation_applied"] == 6
    red_top_right = converted.pixels[:10, -10:].mean(axis=(0, 1))
    assert red_top_right[0] > 180 and red_top_right[1] < 80  # the marker moved to the top-right corner
    upright = read_image(fr.write_jpeg_with_orientation(tmp_path / "plain.jpg", orientation=1))
    assert (upright.height, upright.width) == (20, 40) and "exif_orientation_applied" not in upright.params


def test_icc_profile_is_converted_to_srgb(tmp_path):
    path, original, profile_bytes = fr.write_png_with_icc(tmp_path / "icc.png")
    converted = read_image(path)
    expected = ImageCms.profileToProfile(
        Image.fromarray(original), ImageCms.ImageCmsProfile(fr.io_bytes(profile_bytes)), ImageCms.createProfile("sRGB"),
        outputMode="RGB",
    )
    assert np.array_equal(converted.pixels, np.asarray(expected))
    assert not np.array_equal(converted.pixels, original)  # the profile really changed the colours
    assert "to sRGB" in converted.params["icc"]


def test_sixteen_bit_grayscale_is_windowed_by_percentiles_not_shifted(tmp_path):
    # 12-bit data in a 16-bit PNG: `>> 8` would squeeze it into 0..15 (nearly black)
    values = np.tile(np.linspace(0, 4095, 64).astype(np.uint16), (8, 1))
    path = fr.write_png16(tmp_path / "xray.png", values)
    converted = read_image(path)
    assert converted.mode == "L"
    assert converted.pixels.max() == 255 and converted.pixels.min() == 0
    assert converted.params["window"]["source"].startswith("percentile")
    user = read_image(path, ConvertOptions(window=(2048, 1024)))
    assert user.pixels[0, 0] == 0 and user.pixels[0, -1] == 255


def test_rgba_and_la_are_composited_on_white(tmp_path):
    rgba = np.zeros((4, 4, 4), np.uint8)
    rgba[..., 0] = 255
    rgba[:2, :, 3] = 255  # top half opaque red, bottom half fully transparent
    path = tmp_path / "overlay.png"
    Image.fromarray(rgba).save(path)
    converted = read_image(path)
    assert converted.pixels[0, 0].tolist() == [255, 0, 0]
    assert converted.pixels[3, 3].tolist() == [255, 255, 255]
    assert "composited" in converted.params["alpha"]
    la = Image.fromarray(np.dstack([np.zeros((4, 4), np.uint8), np.full((4, 4), 0, np.uint8)]), "LA")
    la.save(tmp_path / "la.png")
    assert read_image(tmp_path / "la.png").pixels.tolist() == [[255] * 4] * 4


def test_cmyk_palette_and_bilevel_modes(tmp_path):
    Image.new("CMYK", (4, 4), (0, 255, 255, 0)).save(tmp_path / "print.jpg", quality=100)
    cmyk = read_image(tmp_path / "print.jpg")
    assert cmyk.mode == "RGB" and cmyk.pixels[0, 0, 0] > 200 and cmyk.pixels[0, 0, 1] < 60
    palette = Image.new("P", (4, 4))
    palette.putpalette([0, 0, 0, 10, 200, 30] + [0] * 762)
    palette.putpixel((1, 1), 1)
    palette.save(tmp_path / "pal.png")
    converted = read_image(tmp_path / "pal.png")
    assert converted.pixels[1, 1].tolist() == [10, 200, 30] and converted.params["palette_expanded"]
    Image.new("1", (4, 4), 1).save(tmp_path / "bw.bmp")
    assert read_image(tmp_path / "bw.bmp").pixels.tolist() == [[255] * 4] * 4


def test_transparent_palette_gif_composites_on_white(tmp_path):
    image = Image.new("P", (4, 4), 0)
    image.putpalette([0, 0, 0, 0, 0, 255] + [0] * 762)
    image.putpixel((0, 0), 1)
    image.save(tmp_path / "icon.gif", transparency=0)
    converted = read_image(tmp_path / "icon.gif")
    assert converted.pixels[0, 0].tolist() == [0, 0, 255]
    assert converted.pixels[3, 3].tolist() == [255, 255, 255]


def test_animated_gif_takes_the_requested_frame(tmp_path):
    frames = [Image.new("L", (4, 4), value).convert("P") for value in (10, 128, 250)]
    frames[0].save(tmp_path / "cine.gif", save_all=True, append_images=frames[1:])
    first = read_image(tmp_path / "cine.gif")
    last = read_image(tmp_path / "cine.gif", ConvertOptions(frame=2))
    assert first.frame == 0 and last.frame == 2
    assert last.pixels.mean() > first.pixels.mean() + 100


def test_decompression_bomb_guard_stays_on(tmp_path, monkeypatch):
    path = tmp_path / "huge.png"
    Image.new("L", (200, 100)).save(path)
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 5_000)  # the same guard, a smaller budget for the test
    with pytest.raises(ConversionError, match=r"huge\.png is larger than Pillow's decompression-bomb limit .* whole-slide"):
        read_image(path)


def test_truncated_jpeg_is_a_clear_error(tmp_path):
    path = fr.write_jpeg_with_orientation(tmp_path / "cut.jpg", orientation=1, size=(256, 256))
    path.write_bytes(path.read_bytes()[:600])
    with pytest.raises(ConversionError, match=r"cut\.jpg is truncated or corrupt"):
        read_image(path)


def test_masks_keep_their_labels(tmp_path):
    labels = np.zeros((6, 6), np.uint8)
    labels[1:3, 1:3] = 1
    labels[3:5, 3:5] = 7
    Image.fromarray(labels).save(tmp_path / "mask.png")
    converted = read_image(tmp_path / "mask.png", ConvertOptions(as_mask=True, max_size=3))
    assert set(np.unique(converted.pixels)) == {0, 1, 7}
    assert converted.geometry.transforms[-1].how == "nearest"
    Image.fromarray(np.zeros((4, 4, 3), np.uint8)).save(tmp_path / "rgb_mask.png")
    with pytest.raises(ConversionError, match="colour image"):
        read_image(tmp_path / "rgb_mask.png", ConvertOptions(as_mask=True))


def test_max_size_shrinks_images_with_lanczos(tmp_path):
    Image.new("RGB", (400, 100), (50, 100, 150)).save(tmp_path / "wide.png")
    converted = read_image(tmp_path / "wide.png", ConvertOptions(max_size=100))
    assert (converted.width, converted.height) == (100, 25)
    assert converted.geometry == ConversionGeometry((400, 100), (100, 25), (Transform("resize", (400, 100), (100, 25), "lanczos"),))
    assert converted.pixels[10, 50].tolist() == [50, 100, 150]
