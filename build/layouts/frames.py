"""From the stored pixel frame of a source to the converted PNG's frame.

Converters shrink images (WSI `max_size`, pyramid levels), square non-square pixels and turn images
upright (TIFF/EXIF orientation); each records what it did as a `ConversionGeometry` (`mmbu.core.geometry`,
`params["geometry"]` of the report line). Boxes found by a layout are in the stored frame (level 0 for
slides), so before release they are carried through that geometry; masks go the same way with
nearest-neighbour resizing, which keeps label values intact. NIfTI reorientation is not part of it:
volume masks are converted by the converter itself (`as_mask`) and their regions read from the slice.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np
from PIL import Image

from mmbu.core.boxes import Box, PixelBox
from mmbu.core.geometry import ConversionGeometry, Size


def geometry_of(record: Mapping[str, Any]) -> ConversionGeometry:
    """The geometry of one conversion-report line (docs/architecture.md §3.2): `params["geometry"]`, which the
    converter records on every line it writes with `status: ok` (`convert.batch`)."""
    return ConversionGeometry.from_json(record["params"]["geometry"])




def map_boxes(boxes: Iterable[Box], geometry: ConversionGeometry) -> list[PixelBox]:
    """Stored-frame pixel-edge boxes in the output frame, snapped outwards to whole pixels and clipped."""
    if geometry.oriented:
        boxes = [_through_steps(box, geometry) for box in boxes]
        sx = sy = 1.0
    else:  # one scale from stored to output: the same numbers whichever steps made it
        sx, sy = geometry.scale
    width, height = geometry.output_size
    mapped = []
    for x1, y1, x2, y2 in boxes:
        # A tiny epsilon keeps exact edges (e.g. 10.0000001 after scaling) from growing by a pixel.
        nx1 = max(0, math.floor(x1 * sx + 1e-6))
        ny1 = max(0, math.floor(y1 * sy + 1e-6))
        nx2 = min(width, max(nx1 + 1, math.ceil(x2 * sx - 1e-6)))
        ny2 = min(height, max(ny1 + 1, math.ceil(y2 * sy - 1e-6)))
        mapped.append((nx1, ny1, nx2, ny2))
    return mapped


def map_mask(mask: np.ndarray, geometry: ConversionGeometry) -> np.ndarray:
    """A label or boolean mask (stored frame) in the output frame: resized with nearest-neighbour
    sampling (values kept), flipped and rotated as the image was."""
    if not geometry.oriented:
        return _resized(mask, geometry.output_size)
    for step in geometry.transforms:
        mask = _TRANSPOSED[step.how](mask) if step.kind == "orient" else _resized(mask, step.to_size)
    return mask


def _resized(mask: np.ndarray, size: Size) -> np.ndarray:
    if tuple(size) == (mask.shape[1], mask.shape[0]):
        return mask
    was_bool = mask.dtype == bool
    source = mask.astype(np.uint8) if was_bool else mask
    if source.dtype not in (np.uint8, np.int32, np.float32):
        source = source.astype(np.int32)
    resized = np.asarray(Image.fromarray(source).resize(size, Image.Resampling.NEAREST))
    return resized.astype(bool) if was_bool else resized.astype(mask.dtype)


# Pillow's transposes (an `orient` step's `how`) on arrays, and on pixel-edge boxes in a frame of (w, h)
_TRANSPOSED: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "FLIP_LEFT_RIGHT": lambda a: a[:, ::-1],
    "FLIP_TOP_BOTTOM": lambda a: a[::-1],
    "ROTATE_180": lambda a: a[::-1, ::-1],
    "ROTATE_90": lambda a: np.rot90(a, 1),  # counter-clockwise
    "ROTATE_270": lambda a: np.rot90(a, -1),
    "TRANSPOSE": lambda a: a.swapaxes(0, 1),
    "TRANSVERSE": lambda a: a[::-1, ::-1].swapaxes(0, 1),
}
_BOX_TRANSPOSED: dict[str, Callable[[Box, int, int], Box]] = {
    "FLIP_LEFT_RIGHT": lambda b, w, h: (w - b[2], b[1], w - b[0], b[3]),
    "FLIP_TOP_BOTTOM": lambda b, w, h: (b[0], h - b[3], b[2], h - b[1]),
    "ROTATE_180": lambda b, w, h: (w - b[2], h - b[3], w - b[0], h - b[1]),
    "ROTATE_90": lambda b, w, h: (b[1], w - b[2], b[3], w - b[0]),
    "ROTATE_270": lambda b, w, h: (h - b[3], b[0], h - b[1], b[2]),
    "TRANSPOSE": lambda b, w, h: (b[1], b[0], b[3], b[2]),
    "TRANSVERSE": lambda b, w, h: (h - b[3], w - b[2], h - b[1], w - b[0]),
}


def _through_steps(box: Box, geometry: ConversionGeometry) -> Box:
    """One box carried through every step, as continuous pixel-edge coordinates."""
    for step in geometry.transforms:
        (w, h), (tw, th) = step.from_size, step.to_size
        if step.kind == "orient":
            box = _BOX_TRANSPOSED[step.how](box, w, h)
        else:
            box = (box[0] * tw / w, box[1] * th / h, box[2] * tw / w, box[3] * th / h)
    return box
