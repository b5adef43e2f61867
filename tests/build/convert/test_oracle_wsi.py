"""Whole-slide thumbnails against an independent reference built from openslide's plain API.

The reference reads the level our params name *whole* with `read_region` (fine for these small
slides), composites it onto `openslide.background-color` with Pillow's `alpha_composite`, and resizes
it straight to our output size with LANCZOS. Ours streams tiles, box-reduces and resizes, so edges
differ slightly: the comparison is a mean absolute difference plus marker positions. Slides carry
an asymmetric scene (a red block top-left, a blue block bottom-right) so a flip or transpose shows.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import openslide
import pytest
import tifffile
from PIL import Image

sys.path.insert(0, str(Path(__file__).parent))
from factories_slide import write_mrxs, write_ndpi, write_sparse_tiff  # noqa: E402

from mmbu.build.convert import wsi  # noqa: E402
from mmbu.build.convert.base import ConvertOptions  # noqa: E402
from mmbu.build.convert.dispatch import read_image  # noqa: E402

FIXTURES = Path(__file__).parent / "fixtures"


def _scene(width: int, height: int) -> np.ndarray:
    yy, xx = np.mgrid[0:height, 0:width]
    rgb = np.stack([128 + 60 * np.sin(xx / 37.0), 128 + 60 * np.cos(yy / 23.0), 160 + 0 * xx], axis=-1)
    rgb[: height // 6, : width // 6] = (220, 20, 20)
    rgb[-height // 6 :, -width // 6 :] = (20, 20, 220)
    return rgb.round().astype(np.uint8)


def _write_pyramid(path: Path, width: int = 1500, height: int = 1100, levels: int = 4, tile: int = 256) -> Path:
    """A generic tiled pyramid (zlib, lossless) of one scene: level k is level 0 box-reduced by 2**k."""
    base = Image.fromarray(_scene(width, height))
    with tifffile.TiffWriter(path) as writer:
        for level in range(levels):
            plane = np.asarray(base.reduce(2**level)) if level else np.asarray(base)
            writer.write(plane, photometric="rgb", tile=(tile, tile), compression="zlib",
                         subfiletype=1 if level else 0)
    return path


def _reference(path: Path, level: int, output_size: tuple[int, int]) -> np.ndarray:
    with openslide.OpenSlide(str(path)) as slide:
        region = slide.read_region((0, 0), level, slide.level_dimensions[level])
        colour = slide.properties.get("openslide.background-color", "FFFFFF")
    backdrop = Image.new("RGBA", region.size, "#" + colour)
    flat = Image.alpha_composite(backdrop, region).convert("RGB")
    return np.asarray(flat.resize(output_size, Image.Resampling.LANCZOS)).astype(int)


def _compare(path: Path, options: ConvertOptions, mean_tolerance: float = 2.5, reader=read_image) -> np.ndarray:
    converted = reader(path, options)
    params = converted.params
    reference = _reference(path, params["level"], (converted.width, converted.height))
    assert converted.pixels.shape == reference.shape
    difference = np.abs(converted.pixels.astype(int) - reference)
    assert difference.mean() < mean_tolerance, (difference.mean(), params)
    return converted.pixels


def _assert_markers(pixels: np.ndarray) -> None:
    height, width = pixels.shape[:2]
    top_left = pixels[: height // 10, : width // 10].mean(axis=(0, 1))
    bottom_right = pixels[-height // 10 :, -width // 10 :].mean(axis=(0, 1))
    assert top_left[0] > 180 and top_left[2] < 60, top_left
    assert bottom_right[2] > 180 and bottom_right[0] < 60, bottom_right


@pytest.mark.parametrize(
    ("max_size", "mean_tolerance"),
    # 37: level 3 is 188 px wide, box-reduced by 5 into a 38-px canvas whose last column holds only
    # 3 px; the final resize takes the exact box (188/5 = 37.6 canvas px), so no squeeze is left
    # (resizing all 38 columns squeezed the picture by 188/190: mean difference 6.9)
    [(1500, 2.5), (700, 2.5), (300, 2.5), (120, 2.5), (50, 2.5), (37, 2.5)],
)
@pytest.mark.parametrize("fast_path_min_factor", [2, 10**9])  # tifffile fast path, and openslide alone
def test_pyramid_thumbnail_matches_openslide_read_region(
    tmp_path, monkeypatch, max_size, mean_tolerance, fast_path_min_factor
):
    monkeypatch.setattr(wsi, "FAST_PATH_MIN_FACTOR", fast_path_min_factor)
    path = _write_pyramid(tmp_path / "scene.tiff")
    pixels = _compare(path, ConvertOptions(max_size=max_size), mean_tolerance)
    assert max(pixels.shape[:2]) == max_size
    _assert_markers(pixels)


def test_ndpi_thumbnail_matches_openslide_read_region(tmp_path):
    path = write_ndpi(tmp_path / "scene.ndpi", _scene(640, 480))
    pixels = _compare(path, ConvertOptions(max_size=200), mean_tolerance=4.0)  # JPEG strips
    _assert_markers(pixels)


@pytest.mark.parametrize("max_size", [512, 256, 100])
def test_mrxs_with_a_missing_image_matches_openslide_on_its_fill_colour(tmp_path, max_size):
    slide = write_mrxs(tmp_path, missing=[(1, 0)], fill_rgb=(250, 200, 150))
    pixels = _compare(slide, ConvertOptions(max_size=max_size), mean_tolerance=4.0)
    if max_size == 512:  # level 0, where the top-right image is missing (the factory's level 1 is whole)
        quarter = max_size // 4
        assert np.abs(pixels[quarter, 3 * quarter].astype(int) - (250, 200, 150)).max() <= 2


@pytest.mark.parametrize("fixture", ["small.svs", "boxes.tiff"])
def test_openslide_sample_slides_match_read_region(fixture):
    _compare(FIXTURES / fixture, ConvertOptions(max_size=64), mean_tolerance=4.0)


@pytest.mark.parametrize("fast_path_min_factor", [2, 10**9])
def test_sparse_tiles_match_openslide_background(tmp_path, monkeypatch, fast_path_min_factor):
    monkeypatch.setattr(wsi, "FAST_PATH_MIN_FACTOR", fast_path_min_factor)
    path = write_sparse_tiff(tmp_path / "sparse.tiff", empty=[0, 5, 15])
    _compare(path, ConvertOptions(max_size=100), reader=wsi.read)


@pytest.mark.parametrize("max_size", [None, 100])
def test_sparse_tiff_sniffed_as_plain_tiff_matches_openslide_background(tmp_path, max_size):
    # a sparse TIFF this small is sniffed as a plain TIFF: its reader must paint empty tiles white too
    path = write_sparse_tiff(tmp_path / "sparse.tiff", empty=[0, 5, 15])
    converted = read_image(path, ConvertOptions(max_size=max_size))
    assert converted.format == "tiff"
    reference = _reference(path, 0, (converted.width, converted.height))
    assert np.abs(converted.pixels.astype(int) - reference).mean() < 1.0
    if max_size is None:  # full size: the empty tiles are exactly white, the written ones untouched
        np.testing.assert_array_equal(converted.pixels, reference)
