"""Boxes as every stage speaks of them: `(x1, y1, x2, y2)` in image pixels on pixel edges.

x2/y2 are exclusive: a one-pixel object at (3, 4) is (3, 4, 4, 5), and a box's area is `(x2-x1)·(y2-y1)`.
The release writes a box as the text `[x1, y1, x2, y2]` in whole pixels (`box_text`), in a detection row's
`answer` and `options` (docs/architecture.md §3.4).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

Box = tuple[float, float, float, float]
"""A pixel-edge box `(x1, y1, x2, y2)`, possibly fractional (a source frame, a model's answer)."""
PixelBox = tuple[int, int, int, int]
"""A box in whole pixels of a released image."""

BOX_ROLES = ("x1", "y1", "x2", "y2", "cx", "cy", "width", "height")
"""The names sources' box numbers are given by: corners, centre, size (a manifest maps fields or list positions
to them, so row/column and corner/size conventions are all one vocabulary)."""
BOX_SHAPES = (frozenset({"x1", "y1", "x2", "y2"}), frozenset({"x1", "y1", "width", "height"}),
              frozenset({"cx", "cy", "width", "height"}))
"""The role sets that pin a box down: the corners; a corner and the size; the centre and the size."""


def box_shape_problem(roles: Sequence[str]) -> str | None:
    """Why these roles do not pin a box down, or None when they do (one of `BOX_SHAPES`, each role once)."""
    if len(roles) == len(set(roles)) and frozenset(roles) in BOX_SHAPES:
        return None
    shapes = " or ".join("[" + ", ".join(r for r in BOX_ROLES if r in shape) + "]" for shape in BOX_SHAPES)
    return f"roles {list(roles)} do not pin a box down; name {shapes}"


def box_from_roles(numbers: Mapping[str, float]) -> Box:
    """The pixel-edge box of numbers given by role (one of `BOX_SHAPES`)."""
    if "cx" in numbers:
        half_w, half_h = numbers["width"] / 2, numbers["height"] / 2
        return (numbers["cx"] - half_w, numbers["cy"] - half_h, numbers["cx"] + half_w, numbers["cy"] + half_h)
    if "width" in numbers:
        return (numbers["x1"], numbers["y1"], numbers["x1"] + numbers["width"], numbers["y1"] + numbers["height"])
    return (numbers["x1"], numbers["y1"], numbers["x2"], numbers["y2"])


def iou(a: Sequence[float], b: Sequence[float]) -> float:
    """Intersection over union of two boxes, in plain Python (a handful of boxes: numpy would be overhead)."""
    width = min(a[2], b[2]) - max(a[0], b[0])
    height = min(a[3], b[3]) - max(a[1], b[1])
    if width <= 0 or height <= 0:
        return 0.0
    inter = width * height
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def box_text(box: Sequence[float]) -> str:
    """A box as the release writes it in `answer`/`options`: "[x1, y1, x2, y2]" in whole pixels."""
    return "[" + ", ".join(str(int(round(v))) for v in box) + "]"
