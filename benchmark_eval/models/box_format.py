"""Box coordinate conventions per model family, and the one smart-resize computation.

A model answers boxes in *its* frame: pixels of the image it saw, or 0–1000 / 0–1 relative
coordinates, x-first or y-first. The registry declares it per model (never guessed from the
numbers). Three sizes tie the frames together, all recorded on every run record:

* ``image_size``   (w, h) of the original release image — the frame gold boxes live in;
* ``content_size`` (w, h) the original was resized to (its pixels inside the sent canvas);
* ``sent_size``    (w, h) of the canvas actually sent (``content_size`` plus any padding);

and ``content_offset`` (x, y), where the resized image sits on the canvas: (0, 0) for no padding or
padding at the right/bottom, half the margin for a centred square (LLaVA-1.5, MedGemma 1.5).

For ``resize: qwen25_smart_resize`` the runner sends the image already smart-resized, so the
processor's own resize is the identity and pixel answers are in ``sent_size`` pixels; the
conversion below still applies :func:`smart_resize` to ``sent_size`` so a record sent at any size
maps back correctly.
"""
from __future__ import annotations

import math
import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, field_validator, model_validator

Scale = Literal["pixel", "norm1000", "norm1"]
Order = Literal["xyxy", "yxyx"]
Box = tuple[float, float, float, float]
Size = tuple[int, int]

QWEN25_FACTOR = 28            # vision patch 14 × spatial merge 2
QWEN25_MIN_PIXELS = 4 * 28 * 28
QWEN25_MAX_PIXELS = 16384 * 28 * 28
MAX_ASPECT_RATIO = 200        # the Qwen2.5-VL processor refuses more extreme images


class SmartResize(BaseModel):
    """Qwen2.5-VL's processor resize: H and W rounded to multiples of `factor` within [min, max] pixels."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["qwen25_smart_resize"] = "qwen25_smart_resize"
    min_pixels: int = QWEN25_MIN_PIXELS
    max_pixels: int = QWEN25_MAX_PIXELS
    factor: int = QWEN25_FACTOR


class BoxFormat(BaseModel):
    """``{scale: pixel|norm1000|norm1, order: xyxy|yxyx, resize: none|qwen25_smart_resize(min_pixels,max_pixels,factor)}``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    scale: Scale
    order: Order = "xyxy"
    resize: Literal["none"] | SmartResize = "none"

    @field_validator("resize", mode="before")
    @classmethod
    def _parse_resize(cls, value: object) -> object:
        # Accept the compact string form used on the command line and in docs.
        if isinstance(value, str) and value.startswith("qwen25_smart_resize"):
            numbers = [int(n) for n in re.findall(r"\d+", value.removeprefix("qwen25_smart_resize"))]
            if numbers and len(numbers) != 3:
                raise ValueError("qwen25_smart_resize takes (min_pixels, max_pixels, factor)")
            return SmartResize(**dict(zip(("min_pixels", "max_pixels", "factor"), numbers)))
        return value

    @model_validator(mode="after")
    def _resize_only_for_pixels(self) -> BoxFormat:
        if self.resize != "none" and self.scale != "pixel":
            raise ValueError("a processor resize matters only for pixel-scale boxes")
        return self


def smart_resize(height: int, width: int, factor: int = QWEN25_FACTOR, min_pixels: int = QWEN25_MIN_PIXELS,
                 max_pixels: int = QWEN25_MAX_PIXELS) -> tuple[int, int]:
    """(height, width) as the Qwen2.5-VL image processor resizes them (``qwen_vl_utils.smart_resize``).

    Both sides are rounded to the nearest multiple of `factor`; if the area then exceeds
    `max_pixels` (or falls below `min_pixels`) both sides are scaled by the same factor and
    rounded down (up). Raises ValueError for an aspect ratio above 200, as the processor does.
    Restated here because both ``qwen_vl_utils`` and transformers' image processor import torch,
    which an evaluation against a server must not need.
    """
    if height <= 0 or width <= 0:
        raise ValueError(f"image size must be positive, got {width}x{height}")
    if max(height, width) / min(height, width) > MAX_ASPECT_RATIO:
        raise ValueError(f"aspect ratio {max(height, width) / min(height, width):.0f} exceeds {MAX_ASPECT_RATIO}")
    h_bar = max(factor, round(height / factor) * factor)
    w_bar = max(factor, round(width / factor) * factor)
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt((height * width) / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


def model_frame_size(box_format: BoxFormat, sent_size: Size) -> Size:
    """(w, h) of the frame a pixel-scale model answers in, given the size of the image sent."""
    if isinstance(box_format.resize, SmartResize):
        r = box_format.resize
        h, w = smart_resize(sent_size[1], sent_size[0], r.factor, r.min_pixels, r.max_pixels)
        return w, h
    return sent_size


def to_model_convention(box: Box, box_format: BoxFormat, image_size: Size, content_size: Size, sent_size: Size,
                        content_offset: Size = (0, 0)) -> list[float]:
    """An original-pixel box ``[x1, y1, x2, y2]`` as the model should read it (for prompts/options)."""
    sx, sy = content_size[0] / image_size[0], content_size[1] / image_size[1]
    ox, oy = content_offset
    x1, y1, x2, y2 = box[0] * sx + ox, box[1] * sy + oy, box[2] * sx + ox, box[3] * sy + oy   # pixels of the sent canvas
    if box_format.scale == "pixel":
        fw, fh = model_frame_size(box_format, sent_size)
        values = [x1 * fw / sent_size[0], y1 * fh / sent_size[1], x2 * fw / sent_size[0], y2 * fh / sent_size[1]]
        values = [float(round(v)) for v in values]
    else:
        top = 1000.0 if box_format.scale == "norm1000" else 1.0
        values = [x1 / sent_size[0] * top, y1 / sent_size[1] * top, x2 / sent_size[0] * top, y2 / sent_size[1] * top]
        values = [float(round(v)) for v in values] if top == 1000.0 else [round(v, 3) for v in values]
    if box_format.order == "yxyx":
        values = [values[1], values[0], values[3], values[2]]
    return values


def from_model_convention(values: Box | list[float], box_format: BoxFormat, image_size: Size, content_size: Size,
                          sent_size: Size, content_offset: Size = (0, 0)) -> Box:
    """A model's box back to ``(x1, y1, x2, y2)`` in original image pixels (no clipping/sorting)."""
    a, b, c, d = (float(v) for v in values)
    x1, y1, x2, y2 = (b, a, d, c) if box_format.order == "yxyx" else (a, b, c, d)
    if box_format.scale == "pixel":
        fw, fh = model_frame_size(box_format, sent_size)
        kx, ky = sent_size[0] / fw, sent_size[1] / fh
    else:
        top = 1000.0 if box_format.scale == "norm1000" else 1.0
        kx, ky = sent_size[0] / top, sent_size[1] / top
    sx, sy = image_size[0] / content_size[0], image_size[1] / content_size[1]
    ox, oy = content_offset
    return (x1 * kx - ox) * sx, (y1 * ky - oy) * sy, (x2 * kx - ox) * sx, (y2 * ky - oy) * sy


def describe_convention(box_format: BoxFormat, frame_size: Size) -> str:
    """The sentence a prompt uses to state the coordinate convention explicitly."""
    corners = "[y1, x1, y2, x2]" if box_format.order == "yxyx" else "[x1, y1, x2, y2]"
    where = "(x1, y1) is the top-left corner and (x2, y2) the bottom-right corner"
    if box_format.scale == "pixel":
        scale = (f"in pixel coordinates of this image, which is {frame_size[0]} pixels wide and {frame_size[1]} "
                 f"pixels high, with the origin at the top-left corner")
    elif box_format.scale == "norm1000":
        scale = "with every coordinate normalised to the range 0 to 1000 (0 is the left or top edge, 1000 the right or bottom edge)"
    else:
        scale = "with every coordinate a fraction between 0 and 1 of the image width or height (0 is the left or top edge, 1 the right or bottom edge)"
    return f"Boxes are written as {corners}, where {where}, {scale}."
