"""OME-TIFF / TIFF: channel colours by name and OME colour, pyramids, deep grayscale, stacks, masks."""
from __future__ import annotations

import json
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest
import tifffile
from click.testing import CliRunner
from PIL import Image, ImageOps

sys.path.insert(0, str(Path(__file__).parent))

from factories_slide import write_ome_tiff, write_sparse_tiff  # noqa: E402

from mmbu.build.convert.base import ConversionError, ConvertOptions  # noqa: E402
from mmbu.build.convert import tiff  # noqa: E402
from mmbu.build.convert.tiff import DEFAULT_PALETTE, read_ome, read_tiff  # noqa: E402
from mmbu.cli import cli  # noqa: E402

FIXTURES = Path(__file__).parent / "fixtures"


def banded_channels(levels=(4000, 3000, 1000), size=96) -> np.ndarray:
    """3 × size × size uint16: channel k bright only in horizontal band k (12-bit values)."""
    channels = np.zeros((3, size, size), np.uint16)
    band = size // 3
    for k, value in enumerate(levels):
        channels[k, k * band : (k + 1) * band] = value
    return channels


def band_colour(pixels: np.ndarray, k: int, size=96) -> tuple[int, int, int]:
    band = size // 3
    return tuple(int(v) for v in pixels[k * band + band // 2, size // 2])


def test_ome_colours_land_in_the_right_rgb_component(tmp_path):
    # channel order deliberately not red, green, blue
    path = write_ome_tiff(
        tmp_path / "cells.ome.tif",
        banded_channels(),
        names=["mCherry", "DAPI", "GFP"],
        colours=[(255, 0, 0), (0, 0, 255), (0, 255, 0)],
    )
    converted = read_ome(path, ConvertOptions())
    assert converted.mode == "RGB" and converted.format == "ome-tiff"
    assert band_colour(converted.pixels, 0) == (255, 0, 0)
    assert band_colour(converted.pixels, 1) == (0, 0, 255)
    assert band_colour(converted.pixels, 2) == (0, 255, 0)
    channels = converted.params["channels"]
    assert [c["name"] for c in channels] == ["mCherry", "DAPI", "GFP"]
    assert [c["colour"] for c in channels] == ["#FF0000", "#0000FF", "#00FF00"]
    assert {c["colour_source"] for c in channels} == {"ome-color"}
    assert channels[2]["window"]["hi"] == 1000  # per-channel window: the dim channel is not dimmed


def test_channel_names_choose_colours_when_ome_has_none(tmp_path):
    path = write_ome_tiff(tmp_path / "n.ome.tif", banded_channels(), names=["Alexa Fluor 647", "Hoechst 33342", "FITC"], colours=None)
    converted = read_ome(path, ConvertOptions())
    assert band_colour(converted.pixels, 0) == (255, 0, 255)
    assert band_colour(converted.pixels, 1) == (0, 0, 255)
    assert band_colour(converted.pixels, 2) == (0, 255, 0)
    assert [c["colour_source"] for c in converted.params["channels"]] == ["name:647", "name:hoechst", "name:fitc"]


def test_imagej_channel_luts_give_the_colours(tmp_path):
    luts = []
    for rgb in [(0, 0, 255), (255, 0, 255), (0, 255, 0)]:
        luts.append(np.stack([np.linspace(0, value, 256).astype(np.uint8) for value in rgb]))
    path = tmp_path / "ij.tif"
    metadata = {"axes": "CYX", "LUTs": luts, "Labels": ["nuclei", "membrane", "actin"]}
    tifffile.imwrite(path, banded_channels(), imagej=True, metadata=metadata)
    converted = read_tiff(path, ConvertOptions())
    assert [band_colour(converted.pixels, k) for k in range(3)] == [(0, 0, 255), (255, 0, 255), (0, 255, 0)]
    channels = converted.params["channels"]
    assert [c["name"] for c in channels] == ["nuclei", "membrane", "actin"]
    assert {c["colour_source"] for c in channels} == {"imagej-lut"}


def test_unnamed_channels_use_the_documented_palette(tmp_path):
    path = write_ome_tiff(tmp_path / "u.ome.tif", banded_channels(), names=None, colours=None)
    converted = read_ome(path, ConvertOptions())
    for k in range(3):
        assert band_colour(converted.pixels, k) == DEFAULT_PALETTE[k]
    assert {c["colour_source"] for c in converted.params["channels"]} == {"default-palette"}


def test_plain_tiff_channels_are_blended_not_taken_for_rgb(tmp_path):
    path = tmp_path / "cyx.tif"
    tifffile.imwrite(path, banded_channels(), photometric="minisblack", metadata={"axes": "CYX"})
    converted = read_tiff(path, ConvertOptions())
    assert converted.params["axes"] == "CYX"
    for k in range(3):  # each channel's own window: the dim third band is as bright as the others
        assert band_colour(converted.pixels, k) == DEFAULT_PALETTE[k]


def test_overlapping_channels_add_up(tmp_path):
    channels = np.zeros((2, 32, 32), np.uint16)
    channels[:, 8:24, 8:24] = 2000
    channels[0, 0, 0] = 2000  # keep each window 0..2000
    channels[1, 0, 0] = 2000
    path = write_ome_tiff(tmp_path / "o.ome.tif", channels, names=["a", "b"], colours=[(255, 0, 0), (0, 0, 255)])
    converted = read_ome(path, ConvertOptions())
    assert tuple(converted.pixels[16, 16]) == (255, 0, 255) and tuple(converted.pixels[30, 30]) == (0, 0, 0)


def test_pyramid_level_nearest_the_output_size(tmp_path):
    base = banded_channels(size=192)
    level1 = np.full((3, 96, 96), 500, np.uint16)  # different content per level: uniform
    level1[0, 0, 0] = level1[1, 0, 0] = level1[2, 0, 0] = 0
    path = write_ome_tiff(tmp_path / "p.ome.tif", base, ["R", "G", "B"], [(255, 0, 0), (0, 255, 0), (0, 0, 255)], pyramid=[level1])
    full = read_ome(path, ConvertOptions())
    assert full.params["level"] == 0 and full.params["level_count"] == 2 and full.pixels.shape == (192, 192, 3)
    assert band_colour(full.pixels, 1, size=192) == (0, 255, 0)
    small = read_ome(path, ConvertOptions(max_size=96))
    assert small.params["level"] == 1 and small.params["level_shape"] == [3, 96, 96]
    assert tuple(small.pixels[50, 50]) == (255, 255, 255)  # the level-1 content, not the banded base
    between = read_ome(path, ConvertOptions(max_size=120))
    assert between.params["level"] == 0 and between.pixels.shape == (120, 120, 3)


def test_without_a_size_a_pyramid_too_big_for_memory_uses_the_largest_level_that_fits(tmp_path, monkeypatch):
    base = banded_channels(size=192)
    path = write_ome_tiff(tmp_path / "p.ome.tif", base, ["R", "G", "B"], None, pyramid=[base[:, ::2, ::2], base[:, ::4, ::4]])
    monkeypatch.setattr(tiff, "PIXEL_BUDGET", 3 * 100 * 100)  # level 0 (3×192²) is over, level 1 (3×96²) fits
    converted = read_ome(path, ConvertOptions())
    assert converted.params["level"] == 1 and converted.pixels.shape == (96, 96, 3)
    monkeypatch.setattr(tiff, "PIXEL_BUDGET", 10)
    with pytest.raises(ConversionError, match="no pyramid level within the memory budget"):
        read_ome(path, ConvertOptions())


def test_twelve_bit_grayscale_is_not_black(tmp_path):
    values = np.tile(np.linspace(0, 4095, 256).astype(np.uint16), (64, 1))
    path = tmp_path / "twelve.tif"
    tifffile.imwrite(path, values)
    converted = read_tiff(path, ConvertOptions())
    assert converted.mode == "L"
    assert converted.pixels[:, -10:].min() > 240 and converted.pixels[:, :5].max() < 10
    assert (values >> 8).max() == 15  # what a bit shift would have shown: nearly black
    window = converted.params["channels"][0]["window"]
    assert 4000 < window["hi"] <= 4095 and window["source"].startswith("percentile")


def test_user_window_applies_to_grayscale(tmp_path):
    values = np.tile(np.linspace(0, 4095, 256).astype(np.uint16), (8, 1))
    tifffile.imwrite(tmp_path / "w.tif", values)
    converted = read_tiff(tmp_path / "w.tif", ConvertOptions(window=(1000.0, 1000.0)))
    assert converted.params["channels"][0]["window"]["source"] == "user"
    row = converted.pixels[0]
    assert (row[values[0] <= 500] == 0).all() and (row[values[0] >= 1500] == 255).all()


def test_float_grayscale_with_nan(tmp_path):
    values = np.linspace(-1.0, 1.0, 64 * 64, dtype=np.float32).reshape(64, 64)
    values[0, :8] = np.nan
    path = tmp_path / "float.tif"
    tifffile.imwrite(path, values)
    converted = read_tiff(path, ConvertOptions())
    assert (converted.pixels[0, :8] == 0).all() and converted.pixels[-1, -1] == 255 and converted.pixels[32, 0] in range(100, 156)


def test_stack_middle_page_and_frame_index(tmp_path):
    stack = np.stack([np.full((20, 30), 1000 * (k + 1), np.uint16) for k in range(5)])
    stack[:, 0, 0] = 0  # a dark corner gives every page a window
    path = tmp_path / "stack.tif"
    tifffile.imwrite(path, stack)
    middle = read_tiff(path, ConvertOptions())
    assert middle.params["plane"] == {"Q": 2} and middle.pixels[10, 10] == 255
    first = read_tiff(path, ConvertOptions(frame=0))
    assert first.params["plane"] == {"Q": 0} and first.frame == 0
    with pytest.raises(ConversionError, match=r"page 5 is outside 0\.\.4"):
        read_tiff(path, ConvertOptions(frame=5))


def test_ome_z_stack_reads_one_plane_of_all_channels(tmp_path):
    data = np.zeros((4, 2, 16, 16), np.uint16)  # Z C Y X
    for z in range(4):
        data[z, 0, :, : 4 * (z + 1)] = 100  # the red channel's width tells the plane
        data[z, 1, 0, 0] = 50
    path = write_ome_tiff(tmp_path / "z.ome.tif", data, ["Cy3", "DAPI"], None, axes="ZCYX")
    converted = read_ome(path, ConvertOptions())
    assert converted.params["plane"]["Z"] == 2
    assert (converted.pixels[8, :, 0] == 255).sum() == 12
    assert read_ome(path, ConvertOptions(frame=0)).params["plane"]["Z"] == 0


def test_rgb_kept_and_rgba_composited_on_white(tmp_path):
    rgb = np.random.default_rng(1).integers(0, 256, (40, 50, 3), dtype=np.uint8)
    tifffile.imwrite(tmp_path / "rgb.tif", rgb, photometric="rgb")
    converted = read_tiff(tmp_path / "rgb.tif", ConvertOptions())
    np.testing.assert_array_equal(converted.pixels, rgb)
    rgba = np.zeros((10, 10, 4), np.uint8)
    rgba[..., 0] = 200
    rgba[:5, :, 3] = 255  # top half opaque red, bottom half fully transparent
    tifffile.imwrite(tmp_path / "rgba.tif", rgba, photometric="rgb", extrasamples=["unassalpha"])
    composited = read_tiff(tmp_path / "rgba.tif", ConvertOptions()).pixels
    assert tuple(composited[2, 2]) == (200, 0, 0) and tuple(composited[8, 8]) == (255, 255, 255)


def test_grey_with_alpha_is_composited_on_white(tmp_path):
    la = np.zeros((10, 10, 2), np.uint8)
    la[..., 0] = 40
    la[:5, :, 1] = 255  # top half opaque dark grey, bottom half transparent
    tifffile.imwrite(tmp_path / "la.tif", la, photometric="minisblack", planarconfig="contig", extrasamples=["unassalpha"])
    converted = read_tiff(tmp_path / "la.tif", ConvertOptions())
    assert converted.mode == "L" and converted.pixels[2, 2] == 40 and converted.pixels[8, 8] == 255


def test_sixteen_bit_rgb_keeps_colour_balance(tmp_path):
    rgb = np.zeros((10, 10, 3), np.uint16)
    rgb[..., 0] = 4000
    rgb[..., 1] = 2000
    rgb[0, 0] = 0
    tifffile.imwrite(tmp_path / "rgb16.tif", rgb, photometric="rgb")
    pixel = read_tiff(tmp_path / "rgb16.tif", ConvertOptions()).pixels[5, 5]
    assert pixel[0] == 255 and abs(int(pixel[1]) - 128) <= 1 and pixel[2] == 0


def test_palette_tiff_maps_through_its_colour_map(tmp_path):
    indices = np.zeros((8, 8), np.uint8)
    indices[4:] = 1
    colormap = np.zeros((3, 256), np.uint16)
    colormap[:, 1] = (65535, 32896, 0)  # index 1 -> orange
    tifffile.imwrite(tmp_path / "palette.tif", indices, photometric="palette", colormap=colormap)
    pixels = read_tiff(tmp_path / "palette.tif", ConvertOptions()).pixels
    assert tuple(pixels[6, 6]) == (255, 128, 0) and tuple(pixels[0, 0]) == (0, 0, 0)


def test_label_tiff_is_kept_and_resized_nearest(tmp_path):
    labels = np.zeros((100, 100), np.uint16)
    labels[:50, :50] = 3
    labels[50:, 50:] = 7
    tifffile.imwrite(tmp_path / "labels.tif", labels)
    converted = read_tiff(tmp_path / "labels.tif", ConvertOptions(as_mask=True, max_size=33))
    assert converted.pixels.shape == (33, 33) and set(np.unique(converted.pixels)) == {0, 3, 7}
    colour = write_ome_tiff(tmp_path / "c.ome.tif", banded_channels(), None, None)
    with pytest.raises(ConversionError, match="3 channels, so it is not a single-channel label mask"):
        read_ome(colour, ConvertOptions(as_mask=True))


def test_bad_tiffs_are_one_sentence(tmp_path):
    good = tmp_path / "good.tif"
    tifffile.imwrite(good, np.arange(256 * 256, dtype=np.uint16).reshape(256, 256), compression="zlib")
    truncated = tmp_path / "truncated.tif"
    truncated.write_bytes(good.read_bytes()[:2000])
    garbage = tmp_path / "garbage.tif"
    garbage.write_bytes(b"II*\x00" + b"\xff" * 64)
    for path in (truncated, garbage, FIXTURES / "unopenable.tiff", tmp_path / "missing.tif"):
        with pytest.raises(ConversionError, match=path.name) as caught:
            read_tiff(path, ConvertOptions())
        assert "\n" not in str(caught.value)
    with pytest.raises(ConversionError, match="uses a compression that cannot be decoded"):
        read_tiff(FIXTURES / "unopenable.tiff", ConvertOptions())


def test_mmbu_convert_blends_an_ome_tiff_into_an_rgb_png(tmp_path):
    path = write_ome_tiff(tmp_path / "cells.ome.tif", banded_channels(), ["GFP", "DAPI", "Cy3"], None)
    result = CliRunner().invoke(cli, ["convert", str(path), "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    record = json.loads((tmp_path / "out" / "convert-report.jsonl").read_text())
    assert record["format"] == "ome-tiff" and record["mode"] == "RGB"
    pixels = np.asarray(Image.open(record["output"]))
    assert [band_colour(pixels, k) for k in range(3)] == [(0, 255, 0), (0, 0, 255), (255, 0, 0)]


def test_miniswhite_is_inverted_after_windowing_like_pillow_shows_it(tmp_path):
    grey = np.zeros((20, 16), np.uint8)
    grey[:10] = 200  # top rows 200, bottom rows 0; MINISWHITE: 0 is white
    tifffile.imwrite(tmp_path / "white8.tif", grey, photometric="miniswhite")
    converted = read_tiff(tmp_path / "white8.tif", ConvertOptions())
    np.testing.assert_array_equal(converted.pixels, np.asarray(Image.open(tmp_path / "white8.tif").convert("L")))
    assert converted.pixels[0, 0] == 55 and converted.pixels[-1, 0] == 255
    assert converted.params["photometric"] == "MINISWHITE"
    assert converted.params["channels"][0]["inverted"] == "MINISWHITE, after windowing"

    deep = np.zeros((20, 16), np.uint16)
    deep[:10] = 4000  # 12-bit data: the window maps 0..4000 to 0..255, then the inversion
    tifffile.imwrite(tmp_path / "white16.tif", deep, photometric="miniswhite")
    pixels = read_tiff(tmp_path / "white16.tif", ConvertOptions()).pixels
    assert pixels[0, 0] == 0 and pixels[-1, 0] == 255
    windowed = read_tiff(tmp_path / "white16.tif", ConvertOptions(window=(1000.5, 2000))).pixels
    assert windowed[0, 0] == 0 and windowed[-1, 0] == 255  # user window too: 0 stays white


def test_minisblack_is_not_inverted(tmp_path):
    grey = np.zeros((20, 16), np.uint8)
    grey[:10] = 200
    tifffile.imwrite(tmp_path / "black8.tif", grey, photometric="minisblack")
    converted = read_tiff(tmp_path / "black8.tif", ConvertOptions())
    assert converted.pixels[0, 0] == 200 and "inverted" not in converted.params["channels"][0]


def test_cmyk_tiff_is_converted_to_rgb_like_pillow(tmp_path):
    rgb = np.zeros((30, 24, 3), np.uint8)
    rgb[:10], rgb[10:20], rgb[20:] = (220, 30, 30), (30, 200, 40), (240, 240, 240)
    Image.fromarray(rgb).convert("CMYK").save(tmp_path / "cmyk.tif")
    converted = read_tiff(tmp_path / "cmyk.tif", ConvertOptions())
    expected = np.asarray(Image.open(tmp_path / "cmyk.tif").convert("RGB"))
    np.testing.assert_array_equal(converted.pixels, expected)
    assert [tuple(int(v) for v in converted.pixels[row, 5]) for row in (5, 15, 25)] == [
        (220, 30, 30),
        (30, 200, 40),
        (240, 240, 240),
    ]
    assert converted.params["photometric"] == "SEPARATED"
    assert converted.params["channels"][0]["name"] == "CMYK converted to RGB"


def test_sixteen_bit_cmyk_uses_the_full_sample_range(tmp_path):
    inks = np.zeros((8, 8, 4), np.uint16)
    inks[:4, :, 0] = 65535  # full cyan on top: (0, 255, 255)
    inks[4:, :, 3] = 32896  # half black below: about 127 grey
    tifffile.imwrite(tmp_path / "cmyk16.tif", inks, photometric="separated")
    pixels = read_tiff(tmp_path / "cmyk16.tif", ConvertOptions()).pixels
    assert tuple(pixels[1, 1]) == (0, 255, 255)
    assert np.abs(pixels[6, 6].astype(int) - 127).max() <= 1


@pytest.mark.parametrize("orientation", range(1, 9))
def test_orientation_tag_is_applied_like_exif_transpose(tmp_path, orientation):
    rgb = np.zeros((12, 20, 3), np.uint8)
    rgb[:3, :4] = (255, 0, 0)  # a red block top-left of the stored pixels
    rgb[-2:, -5:] = (0, 0, 255)  # and a blue one bottom-right: every transpose is told apart
    path = tmp_path / "oriented.tif"
    tifffile.imwrite(path, rgb, photometric="rgb", extratags=[(274, "H", 1, orientation, True)])
    converted = read_tiff(path, ConvertOptions())
    expected = np.asarray(ImageOps.exif_transpose(Image.open(path)).convert("RGB"))
    np.testing.assert_array_equal(converted.pixels, expected)
    assert converted.params["orientation"] == orientation
    assert (converted.params["orientation_applied"] is None) == (orientation == 1)

    labels = np.zeros((12, 20), np.uint8)
    labels[:3, :4], labels[-2:, -5:] = 1, 2
    tifffile.imwrite(tmp_path / "mask.tif", labels, extratags=[(274, "H", 1, orientation, True)])
    mask = read_tiff(tmp_path / "mask.tif", ConvertOptions(as_mask=True)).pixels
    np.testing.assert_array_equal(mask == 1, expected[..., 0] == 255)  # the mask lands on its image
    np.testing.assert_array_equal(mask == 2, expected[..., 2] == 255)


def test_orientation_6_puts_the_top_left_block_top_right(tmp_path):
    rgb = np.zeros((12, 20, 3), np.uint8)
    rgb[:3, :4] = (255, 0, 0)
    tifffile.imwrite(tmp_path / "o6.tif", rgb, photometric="rgb", extratags=[(274, "H", 1, 6, True)])
    pixels = read_tiff(tmp_path / "o6.tif", ConvertOptions(max_size=10)).pixels
    assert pixels.shape == (10, 6, 3)
    assert pixels[0, -1, 0] > 200 and pixels[0, 0, 0] < 50 and pixels[-1, -1, 0] < 50


def _write_sparse_grey(path: Path, tiles: list[np.ndarray | None], size: int = 64, tile: int = 32) -> Path:
    """A tiled 16-bit grey TIFF whose `None` tiles were never written (byte count 0)."""
    tifffile.imwrite(
        path,
        (b"" if values is None else values.astype("<u2").tobytes() for values in tiles),
        shape=(size, size),
        dtype="<u2",
        photometric="minisblack",
        tile=(tile, tile),
    )
    return path


def test_unwritten_tiles_are_white_and_left_out_of_the_window(tmp_path):
    ramp = np.tile(np.linspace(1000, 2000, 32), (32, 1))  # 12-bit data far from 0
    path = _write_sparse_grey(tmp_path / "sparse16.tif", [None, ramp, ramp, None])
    converted = read_tiff(path, ConvertOptions())
    assert (converted.pixels[:32, :32] == 255).all() and (converted.pixels[32:, 32:] == 255).all()
    window = converted.params["channels"][0]["window"]
    assert window["lo"] >= 1000  # the zeros tifffile decodes for the empty tiles do not widen the window
    written = converted.pixels[:32, 32:].astype(int)
    expected = np.clip(np.rint((ramp - window["lo"]) * 255.0 / (window["hi"] - window["lo"])), 0, 255)
    assert np.abs(written - expected).max() <= 1
    assert converted.params["missing_tiles"] == {"pixels": 2 * 32 * 32, "fill": "white"}
    labels = np.full((32, 32), 3)
    mask = read_tiff(_write_sparse_grey(tmp_path / "labels.tif", [labels, None, labels, labels]), ConvertOptions(as_mask=True))
    assert (mask.pixels[:32, 32:] == 0).all() and (mask.pixels[32:] == 3).all()
    assert mask.params["missing_tiles"] == {"pixels": 32 * 32, "fill": "label 0"}


def test_unwritten_tiles_of_a_sparse_rgb_tiff_are_white(tmp_path):
    path = write_sparse_tiff(tmp_path / "sparse.tif", empty=[0, 5, 15])
    converted = read_tiff(path, ConvertOptions())
    assert tuple(converted.pixels[10, 10]) == (255, 255, 255)  # tile 0
    assert tuple(converted.pixels[64 + 10, 64 + 10]) == (255, 255, 255)  # tile 5
    assert tuple(converted.pixels[10, 64 + 10]) == (200, 50, 50)  # tile 1 was written
    assert read_tiff(write_sparse_tiff(tmp_path / "full.tif", empty=[]), ConvertOptions()).params["missing_tiles"] is None


def test_unwritten_strips_are_white_too(tmp_path):
    strip = zlib.compress(np.full((8, 16), 90, np.uint8).tobytes())  # encoded strips: tifffile writes b"" as absent
    tifffile.imwrite(
        tmp_path / "strips.tif",
        (b"" if index == 1 else strip for index in range(3)),
        shape=(24, 16),
        dtype=np.uint8,
        photometric="minisblack",
        rowsperstrip=8,
        compression="zlib",
    )
    converted = read_tiff(tmp_path / "strips.tif", ConvertOptions())
    assert (converted.pixels[8:16] == 255).all() and (converted.pixels[:8] == 90).all() and (converted.pixels[16:] == 90).all()
    assert converted.params["missing_tiles"]["pixels"] == 8 * 16


def test_separated_inks_that_are_not_cmyk_are_blended_as_channels(tmp_path):
    inks = np.zeros((12, 12, 4), np.uint8)
    inks[:6, :, 0] = 200  # first ink on the top half only
    tifffile.imwrite(tmp_path / "inks.tif", inks, photometric="separated", extratags=[(332, "H", 1, 2, True)])
    converted = read_tiff(tmp_path / "inks.tif", ConvertOptions())
    assert len(converted.params["channels"]) == 4  # InkSet 2 (not CMYK): one blend channel per ink
    assert tuple(converted.pixels[2, 2]) == DEFAULT_PALETTE[0] and tuple(converted.pixels[9, 9]) == (0, 0, 0)
