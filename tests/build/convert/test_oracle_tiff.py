"""OME-TIFF / TIFF conversion against the blend recipe written out with numpy alone.

Recipe (docs/architecture.md §4, curation-anchors §1.4): each channel clipped to its own 0.5–99.5 percentiles,
scaled to 0..1, multiplied by its colour, summed, clipped, ×255. The expected image is computed
here from the arrays handed to tifffile, never from our code.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import tifffile

sys.path.insert(0, str(Path(__file__).parent))
from factories_slide import write_ome_tiff  # noqa: E402

from mmbu.build.convert.dispatch import read_image  # noqa: E402


def _expected_blend(channels: np.ndarray, colours: list[tuple[int, int, int]]) -> np.ndarray:
    total = np.zeros((*channels.shape[1:], 3))
    for values, colour in zip(channels.astype(np.float64), colours):
        lo, hi = np.percentile(values, [0.5, 99.5])
        total += np.clip((values - lo) / (hi - lo), 0.0, 1.0)[..., None] * (np.asarray(colour) / 255.0)
    return np.rint(np.clip(total, 0.0, 1.0) * 255.0)


def test_ome_channels_blend_like_the_numpy_recipe(tmp_path):
    rng = np.random.default_rng(0)
    channels = np.zeros((3, 64, 80), np.uint16)
    channels[0] = rng.integers(100, 4000, (64, 80))  # 12-bit nuclei
    channels[1, 10:30, 10:40] = 3000
    channels[1] += rng.integers(0, 50, (64, 80)).astype(np.uint16)
    channels[2] = np.tile(np.linspace(0, 60000, 80), (64, 1)).astype(np.uint16)
    colours = [(0, 0, 255), (0, 255, 0), (255, 0, 255)]
    path = write_ome_tiff(tmp_path / "cells.ome.tiff", channels, ["DAPI", "GFP", "Cy5"], colours)
    converted = read_image(path)
    assert converted.format == "ome-tiff"
    assert np.abs(converted.pixels.astype(int) - _expected_blend(channels, colours)).max() <= 1


def test_twelve_bit_grey_tiff_windowed_like_numpy_percentiles(tmp_path):
    values = np.random.default_rng(4).integers(0, 4096, (48, 40)).astype(np.uint16)
    tifffile.imwrite(tmp_path / "grey.tif", values, photometric="minisblack")
    converted = read_image(tmp_path / "grey.tif")
    lo, hi = np.percentile(values.astype(np.float64), [0.5, 99.5])
    expected = np.clip(np.rint((values - lo) * 255.0 / (hi - lo)), 0, 255)
    assert np.abs(converted.pixels.astype(int) - expected).max() <= 1
