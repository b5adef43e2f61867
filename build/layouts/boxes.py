"""Box helpers shared by the detection layouts: conversions from source conventions and sanity checks."""
from __future__ import annotations

from mmbu.core.boxes import Box


def xywh_to_xyxy(x: float, y: float, width: float, height: float) -> Box:
    """COCO's [x, y, width, height] (top-left corner) to pixel-edge (x1, y1, x2, y2)."""
    return (float(x), float(y), float(x) + float(width), float(y) + float(height))


def yolo_to_xyxy(cx: float, cy: float, width: float, height: float, size: tuple[int, int]) -> Box:
    """YOLO's centre/size normalised to [0, 1] to pixel-edge (x1, y1, x2, y2) in an image of `size` (w, h)."""
    img_w, img_h = size
    return ((cx - width / 2) * img_w, (cy - height / 2) * img_h, (cx + width / 2) * img_w, (cy + height / 2) * img_h)


def clip_box(box: Box, size: tuple[int, int] | None) -> tuple[Box | None, str | None]:
    """The box clipped to the image, or (None, reason) when it is empty or lies outside it."""
    x1, y1, x2, y2 = box
    if not (x2 > x1 and y2 > y1):
        return None, f"box {list(box)} has no area"
    if size is None:
        return box, None
    width, height = size
    clipped = (max(0.0, x1), max(0.0, y1), min(float(width), x2), min(float(height), y2))
    if not (clipped[2] > clipped[0] and clipped[3] > clipped[1]):
        return None, f"box {list(box)} lies outside the {width}x{height} image"
    return clipped, None
