"""Map a model's box into the original release image's pixel frame, by its *declared* convention.

Each model in the registry declares ``box_format``: ``scale`` (``pixel`` = pixels of the image the
model saw, ``norm1000`` = 0-1000 of the image, ``norm1`` = 0-1), ``order`` (``xyxy`` or ``yxyx``,
Gemini) and ``resize`` (``none``, or ``qwen25_smart_resize`` for Qwen2.5-VL, whose pixel boxes
refer to the processor's resized image). The scale is never guessed from the magnitudes and
several readings are never tried; a wrong declaration gives a wrong score, visibly, for every box.

Afterwards a box is put in order (inverted corners swapped), clipped to the image, and dropped if
nothing is left of it (zero width or height).
"""
from __future__ import annotations

import math
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, field_validator

from ._boxes import RawBox

Box = tuple[float, float, float, float]
Size = tuple[int, int]  # (width, height)


class SmartResize(BaseModel):
    """Qwen2.5-VL's processor resize: sides rounded to multiples of `factor` within a pixel budget."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Literal["qwen25_smart_resize"] = "qwen25_smart_resize"
    factor: int = 28
    min_pixels: int = 56 * 56
    max_pixels: int = 14 * 14 * 4 * 1280


class BoxFormat(BaseModel):
    """A model family's box convention, as declared in the model registry."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    scale: Literal["pixel", "norm1000", "norm1"]
    order: Literal["xyxy", "yxyx"] = "xyxy"
    resize: SmartResize | None = None

    @field_validator("resize", mode="before")
    @classmethod
    def _read_resize(cls, value: Any) -> Any:
        """Accept ``none``, a mapping, or the registry's call-like string ``qwen25_smart_resize(max_pixels=…)``."""
        if value is None or (isinstance(value, str) and value.strip().lower() in ("", "none")):
            return None
        if isinstance(value, str):
            match = re.fullmatch(r"\s*(\w+)\s*(?:\((.*)\))?\s*", value)
            if not match:
                raise ValueError(f"cannot read resize {value!r}")
            params: dict[str, Any] = {"name": match.group(1)}
            for part in filter(None, (p.strip() for p in (match.group(2) or "").split(","))):
                key, _, raw = part.partition("=")
                params[key.strip()] = _product_int(raw.strip())
            return params
        if isinstance(value, dict) and "kind" in value and "name" not in value:
            value = {"name": value["kind"], **{k: v for k, v in value.items() if k != "kind"}}
        return value


def _product_int(expression: str) -> int:
    """An integer written as a product such as ``28*28*1280`` (how Qwen's docs write pixel budgets)."""
    if not re.fullmatch(r"\d+(\s*\*\s*\d+)*", expression):
        raise ValueError(f"not an integer or a product of integers: {expression!r}")
    return math.prod(int(p) for p in expression.split("*"))


def smart_resize(width: int, height: int, spec: SmartResize) -> Size:
    """(width, height) Qwen2.5-VL's processor resizes a ``width × height`` image to.

    Same arithmetic as ``smart_resize`` in transformers' ``image_processing_qwen2_vl`` and in
    ``qwen_vl_utils`` (neither is importable without torch, so it is restated here).
    """
    factor = spec.factor
    if min(width, height) <= 0:
        raise ValueError(f"image size must be positive, got {width}x{height}")
    h_bar = max(factor, round(height / factor) * factor)
    w_bar = max(factor, round(width / factor) * factor)
    if h_bar * w_bar > spec.max_pixels:
        beta = math.sqrt(height * width / spec.max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif h_bar * w_bar < spec.min_pixels:
        beta = math.sqrt(spec.min_pixels / (height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return w_bar, h_bar


def model_frame(fmt: BoxFormat, image_size: Size, sent_size: Size | None) -> tuple[float, float]:
    """Width and height of the frame the model's numbers live in."""
    if fmt.scale == "norm1000":
        return 1000.0, 1000.0
    if fmt.scale == "norm1":
        return 1.0, 1.0
    sent = sent_size or image_size
    if fmt.resize is not None:
        return tuple(float(v) for v in smart_resize(sent[0], sent[1], fmt.resize))  # type: ignore[return-value]
    return float(sent[0]), float(sent[1])


def to_original_pixels(raw: RawBox, fmt: BoxFormat, image_size: Size, sent_size: Size | None = None) -> Box | None:
    """`raw` (the model's numbers) as ``(x1, y1, x2, y2)`` pixels of the original image, or None.

    `image_size` is the original release image's (width, height); `sent_size` the size of the
    image actually sent (the runner may have shrunk it), which ``pixel`` boxes refer to.
    None means the box is degenerate: nothing of it lies inside the image.
    """
    a, b, c, d = raw
    x1, y1, x2, y2 = (b, a, d, c) if fmt.order == "yxyx" else (a, b, c, d)
    frame_w, frame_h = model_frame(fmt, image_size, sent_size)
    width, height = image_size
    sx, sy = width / frame_w, height / frame_h
    x1, x2 = sorted((x1 * sx, x2 * sx))
    y1, y2 = sorted((y1 * sy, y2 * sy))
    x1, x2 = min(max(x1, 0.0), width), min(max(x2, 0.0), width)
    y1, y2 = min(max(y1, 0.0), height), min(max(y2, 0.0), height)
    if x2 - x1 <= 0 or y2 - y1 <= 0:
        return None
    return (x1, y1, x2, y2)
