"""Every reader records how it moved the stored frame (`Converted.geometry`), and a box or mask drawn on the
stored image lands on the same pixels of the PNG through the layouts' mapping (`layouts.frames`)."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import tifffile
from PIL import Image

sys.path.insert(0, str(Path(__file__).parent))
import factories_slide as fs  # noqa: E402

from mmbu.build.convert import base  # noqa: E402
from mmbu.build.convert.base import ConversionError, Converted, ConvertOptions  # noqa: E402
from mmbu.build.convert.dispatch import read_image  # noqa: E402
from mmbu.build.layouts.frames import map_boxes, map_mask  # noqa: E402
from mmbu.core.geometry import ORIENTATION_TRANSPOSES, ConversionGeometry  # noqa: E402


def _marker(height: int = 24, width: int = 40) -> np.ndarray:
    """Grey with one asymmetric bright block, placed so no flip or turn maps it onto itself."""
    pixels = np.full((height, width), 60, np.uint8)
    pixels[2:8, 4:14] = 250
    return pixels


def _bright_box(pixels: np.ndarray) -> tuple[int, int, int, int]:
    rows, columns = np.nonzero((pixels > 155).any(axis=1))[0], np.nonzero((pixels > 155).any(axis=0))[0]
    return int(columns[0]), int(rows[0]), int(columns[-1] + 1), int(rows[-1] + 1)


def _save_png(path, pixels, orientation):
    exif = Image.Exif()
    exif[0x0112] = orientation
    Image.fromarray(pixels).save(path.with_suffix(".png"), exif=exif.tobytes())
    return path.with_suffix(".png")


def _save_tiff(path, pixels, orientation):
    tifffile.imwrite(path.with_suffix(".tif"), pixels, extratags=[(274, "H", 1, orientation, True)])
    return path.with_suffix(".tif")


@pytest.mark.parametrize("save", [_save_png, _save_tiff], ids=["exif-png", "tiff-tag"])
@pytest.mark.parametrize("orientation", sorted(ORIENTATION_TRANSPOSES))
@pytest.mark.parametrize("max_size", [None, 20])
def test_a_stored_box_and_mask_follow_the_image_upright(tmp_path, save, orientation, max_size):
    stored = _marker()
    converted = read_image(save(tmp_path / f"o{orientation}", stored, orientation), ConvertOptions(max_size=max_size))
    geometry = converted.geometry
    assert geometry.stored_size == (40, 24) and geometry.output_size == (converted.width, converted.height)
    assert [s.how for s in geometry.transforms if s.kind == "orient"] == [ORIENTATION_TRANSPOSES[orientation]]
    (box,) = map_boxes([(4, 2, 14, 8)], geometry)
    if max_size is None:  # exact pixels: the box is the bright block's box
        assert box == _bright_box(converted.pixels)
        assert np.array_equal(map_mask(stored > 155, geometry), converted.pixels > 155)
    else:  # after shrinking, the box still covers the block (snapped outwards) and the mask overlaps it
        x1, y1, x2, y2 = _bright_box(converted.pixels)
        assert box[0] <= x1 + 1 and box[1] <= y1 + 1 and box[2] >= x2 - 1 and box[3] >= y2 - 1
        mapped = map_mask(stored > 155, geometry)
        bright = converted.pixels > 155
        assert mapped.shape == bright.shape and np.count_nonzero(mapped & bright) >= 0.6 * np.count_nonzero(bright)


def test_a_pyramid_level_is_a_step_and_boxes_scale_from_level_0(tmp_path):
    base_level = np.zeros((1, 512, 1024), np.uint8)
    base_level[:, 100:200, 300:500] = 255
    path = fs.write_ome_tiff(tmp_path / "pyramid.ome.tif", base_level, None, None,
                             pyramid=[base_level[:, ::2, ::2], base_level[:, ::4, ::4]])
    converted = read_image(path, ConvertOptions(max_size=256))
    assert converted.format == "ome-tiff" and converted.geometry.stored_size == (1024, 512)
    assert [(s.kind, s.to_size) for s in converted.geometry.transforms] == [("level", (256, 128))]
    assert map_boxes([(300, 100, 500, 200)], converted.geometry) == [_bright_box(converted.pixels)]


def test_a_slide_thumbnail_records_its_level_and_the_resize_after_it(tmp_path):
    path = fs.write_pyramid_tiff(tmp_path / "slide.tiff", size=(4096, 3072), levels=4)
    converted = read_image(path, ConvertOptions(max_size=700))
    geometry = converted.geometry
    assert converted.format == "wsi" and geometry.stored_size == (4096, 3072)
    assert [(s.kind, s.from_size, s.to_size) for s in geometry.transforms] == [
        ("level", (4096, 3072), (1024, 768)), ("resize", (1024, 768), (700, 525))]
    assert geometry.scale == (700 / 4096, 525 / 3072)


def test_a_reader_whose_geometry_does_not_end_at_its_pixels_is_refused(tmp_path, monkeypatch):
    """A reader that forgets a step (here: it shrank the image but recorded nothing) fails loudly."""
    def forgetful(path, options):
        return Converted(np.zeros((10, 20), np.uint8), "raster", geometry=ConversionGeometry.kept((40, 20)))

    monkeypatch.setitem(base.READERS, "raster", f"{__name__}:forgetful")
    monkeypatch.setitem(globals(), "forgetful", forgetful)
    Image.new("L", (40, 20)).save(tmp_path / "a.png")
    with pytest.raises(ConversionError, match="returned 20 x 10 pixels for a.png but recorded a geometry that "
                                              "ends at 40 x 20"):
        read_image(tmp_path / "a.png")


def test_a_reader_without_a_geometry_is_refused(tmp_path, monkeypatch):
    """A reader that records no geometry fails its file: its boxes could not be placed on the PNG."""
    def unplaced(path, options):
        return Converted(np.zeros((20, 40), np.uint8), "raster", params={"source_size": [80, 40]})

    monkeypatch.setitem(base.READERS, "raster", f"{__name__}:unplaced")
    monkeypatch.setitem(globals(), "unplaced", unplaced)
    Image.new("L", (40, 20)).save(tmp_path / "a.png")
    with pytest.raises(ConversionError, match="the raster reader returned no geometry for a.png"):
        read_image(tmp_path / "a.png")
