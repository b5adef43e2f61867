"""Map a model's box into the original release image's pixel frame, by its *declared* convention.

The convention (``box_format`` in the model registry, copied onto every run record) and the
frame arithmetic live in :mod:`mmbu.benchmark_eval.models.box_format`; this module adds what
scoring needs on top: put the corners in order, clip to the image, and drop a box of which
nothing is left. The scale is never guessed from the magnitudes and several readings are never
tried; a wrong declaration gives a visibly wrong score for every box.
"""
from __future__ import annotations

import math

from mmbu.benchmark_eval.models.box_format import BoxFormat, from_model_convention
from mmbu.benchmark_eval.parser._boxes import RawBox

Box = tuple[float, float, float, float]
Size = tuple[int, int]  # (width, height)


def to_original_pixels(raw: RawBox, fmt: BoxFormat, image_size: Size, sent_size: Size | None = None,
                       content_size: Size | None = None, content_offset: Size | None = None) -> Box | None:
    """`raw` (the model's numbers) as ``(x1, y1, x2, y2)`` pixels of the original image, or None.

    `image_size` is the original release image's (width, height); `sent_size` the canvas actually
    sent (default: the original) and `content_size` the resized image inside it (default: the
    whole canvas, i.e. no padding). Inverted corners are swapped and the box is clipped to the
    image; None means nothing of it lies inside the image (or it is not finite). `content_offset` is
    where the resized image sits on the canvas (default (0, 0): no padding, or right/bottom padding).
    """
    sent = tuple(sent_size) if sent_size is not None else tuple(image_size)
    content = tuple(content_size) if content_size is not None else sent
    offset = tuple(content_offset) if content_offset is not None else (0, 0)
    x1, y1, x2, y2 = from_model_convention(raw, fmt, tuple(image_size), content, sent, offset)
    if not all(math.isfinite(v) for v in (x1, y1, x2, y2)):
        return None
    width, height = image_size
    x1, x2 = sorted((min(max(x1, 0.0), width), min(max(x2, 0.0), width)))
    y1, y2 = sorted((min(max(y1, 0.0), height), min(max(y2, 0.0), height)))
    if x2 - x1 <= 0 or y2 - y1 <= 0:
        return None
    return (x1, y1, x2, y2)
