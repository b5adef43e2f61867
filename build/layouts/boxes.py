"""Box helpers shared by the detection layouts: conversions from source conventions and sanity checks."""
from __future__ import annotations

import math
from collections.abc import Sequence

from mmbu.core.boxes import Box, box_from_roles


def ordered_box(values: Sequence[float], order: Sequence[str]) -> Box:
    """A source's four box numbers written in `order` (roles of `mmbu.core.boxes.BOX_ROLES`) as a pixel-edge box;
    ValueError when they are not four numbers."""
    if isinstance(values, (str, bytes)) or len(values) != 4:
        raise ValueError(f"{values!r} is not four numbers")
    return box_from_roles(dict(zip(order, (float(v) for v in values))))


def vertices_box(coordinates: Sequence[float]) -> Box:
    """The box of a polygon's vertices written flat, `[x1, y1, x2, y2, x3, y3, ...]` (COCO polygons, YOLO
    segmentation lines)."""
    xs, ys = coordinates[0::2], coordinates[1::2]
    return (min(xs), min(ys), max(xs), max(ys))


def fractions_to_pixels(box: Box, size: tuple[int, int]) -> Box:
    """A box given in fractions of the image's width and height, in pixels of an image of `size` (w, h)."""
    width, height = size
    return (box[0] * width, box[1] * height, box[2] * width, box[3] * height)


def yolo_to_xyxy(cx: float, cy: float, width: float, height: float, size: tuple[int, int]) -> Box:
    """YOLO's centre/size normalised to [0, 1] to pixel-edge (x1, y1, x2, y2) in an image of `size` (w, h)."""
    img_w, img_h = size
    return ((cx - width / 2) * img_w, (cy - height / 2) * img_h, (cx + width / 2) * img_w, (cy + height / 2) * img_h)


def clip_box(box: Box, size: tuple[int, int] | None) -> tuple[Box | None, str | None]:
    """The box clipped to the image, or (None, reason) when it is empty or lies outside it."""
    x1, y1, x2, y2 = box
    if not all(math.isfinite(value) for value in box):  # inf, nan: no image holds it, and no later step takes it
        return None, f"box {list(box)} holds a number that is not finite"
    if not (x2 > x1 and y2 > y1):
        return None, f"box {list(box)} has no area"
    if size is None:
        return box, None
    width, height = size
    clipped = (max(0.0, x1), max(0.0, y1), min(float(width), x2), min(float(height), y2))
    if not (clipped[2] > clipped[0] and clipped[3] > clipped[1]):
        return None, f"box {list(box)} lies outside the {width}x{height} image"
    return clipped, None
