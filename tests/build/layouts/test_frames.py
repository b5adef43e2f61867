"""Boxes and masks from the source frame into the converted PNG's frame."""
from __future__ import annotations

import numpy as np

from mmbu.build.layouts import geometry_of, map_boxes, map_mask
from mmbu.core.geometry import ConversionGeometry


def test_boxes_scale_with_the_recorded_geometry_and_snap_outwards():
    geometry = ConversionGeometry.kept((8192, 4096)).then("level", (2048, 1024))
    record = {"width": 2048, "height": 1024, "params": {"level": 2, "geometry": geometry.to_json()}}
    frame = geometry_of(record)
    assert frame.scale == (0.25, 0.25)
    assert map_boxes([(400.0, 800.0, 1200.0, 1602.0), (8000, 4000, 8192, 4096)], frame) == [
        (100, 200, 300, 401), (2000, 1000, 2048, 1024)]


def test_tiny_boxes_keep_at_least_one_pixel():
    assert map_boxes([(10.0, 10.0, 11.0, 11.0)], ConversionGeometry.scaled((1000, 1000), (100, 100))) == [(1, 1, 2, 2)]


def test_masks_resize_with_nearest_neighbour_keeping_values():
    mask = np.zeros((8, 8), np.uint16)
    mask[0:4, 0:4] = 300
    mask[4:8, 4:8] = 7
    small = map_mask(mask, ConversionGeometry.scaled((8, 8), (4, 4)))
    assert small.dtype == np.uint16 and set(np.unique(small)) == {0, 7, 300}
    assert small[0, 0] == 300 and small[3, 3] == 7 and small[0, 3] == 0
    roi = map_mask(mask == 7, ConversionGeometry.scaled((8, 8), (16, 16)))
    assert roi.dtype == bool and roi.sum() == 64 and roi[8:, 8:].all()
