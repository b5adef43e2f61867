"""Find bounding boxes in a model's free-text detection answer.

Only *where the numbers are* is decided here; what they mean (pixels of which image, 0-1000,
0-1, x-first or y-first) is the model's declared convention, applied by :mod:`._coords`.
Only the final answer counts: reasoning blocks are dropped, and so are draft boxes before a
final-answer line or in earlier code blocks. Sources, first that yields a box wins:

1. JSON objects with a ``bbox_2d`` / ``bbox`` / ``box_2d`` / ``box`` key (Qwen2.5-VL, Gemini …),
   a single box or a list of boxes;
2. Qwen tokens ``<|box_start|>(x1,y1),(x2,y2)<|box_end|>``;
3. InternVL ``<box>[[x1, y1, x2, y2], …]</box>``;
4. bare point pairs ``(x1,y1),(x2,y2)`` (Qwen tokens after a server stripped special tokens);
5. bracketed lists ``[x1, y1, x2, y2]`` anywhere in the text.
"""
from __future__ import annotations

import json
import math
import re
from collections import deque
from dataclasses import dataclass
from typing import Any

from mmbu.benchmark_eval.parser._text import (DEFAULT_REASONING, ReasoningMarkers, code_blocks, strip_reasoning,
                                              unwrap_code_fences)

RawBox = tuple[float, float, float, float]
BOX_KEYS = ("bbox_2d", "bbox", "box_2d", "box")
_NUMBER = r"(-?\d+(?:\.\d+)?)"
_QWEN_TOKENS = re.compile(
    r"<\|box_start\|>\s*\(\s*{n}\s*,\s*{n}\s*\)\s*,?\s*\(\s*{n}\s*,\s*{n}\s*\)\s*<\|box_end\|>".format(n=_NUMBER)
)
_INTERNVL = re.compile(r"<box>\s*(\[.*?\])\s*</box>", re.DOTALL)
_POINT_PAIR = re.compile(r"\(\s*{n}\s*,\s*{n}\s*\)\s*,?\s*(?:to\s*)?\(\s*{n}\s*,\s*{n}\s*\)".format(n=_NUMBER))
_BRACKETED = re.compile(r"\[\s*{n}\s*,\s*{n}\s*,\s*{n}\s*,\s*{n}\s*\]".format(n=_NUMBER))


@dataclass(frozen=True)
class BoxExtraction:
    """The boxes found (in the model's own coordinates and order) and which source they came from."""

    boxes: tuple[RawBox, ...]
    path: str  # json | qwen_box_tokens | internvl_box | point_pair | bracketed_list | none

    @property
    def found(self) -> bool:
        return bool(self.boxes)


def _as_box(value: Any) -> RawBox | None:
    if isinstance(value, (list, tuple)) and len(value) == 4 and all(
        isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in value
    ):
        return tuple(float(v) for v in value)  # type: ignore[return-value]
    return None


def _boxes_in_value(value: Any) -> list[RawBox]:
    """Every box under a BOX_KEYS key, anywhere in a decoded JSON value, in document order."""
    found: list[RawBox] = []
    if isinstance(value, dict):
        for key, item in value.items():
            if str(key).lower() in BOX_KEYS:
                if (box := _as_box(item)) is not None:
                    found.append(box)
                elif isinstance(item, list):
                    found.extend(b for b in map(_as_box, item) if b is not None)
            else:
                found.extend(_boxes_in_value(item))
    elif isinstance(value, list):
        for item in value:
            found.extend(_boxes_in_value(item))
    return found


# Where a JSON value holding boxes can start; a reply may hold thousands of braces that start nothing.
_JSON_START = re.compile(r"[{\[]\s*[\"{\[\d-]")
_MAX_JSON_FAILURES = 64  # a failed decode costs the length of the text before it (json counts lines): bounded


def _json_boxes(text: str) -> list[RawBox]:
    decoder = json.JSONDecoder()
    found: list[RawBox] = []
    position, failures = 0, 0
    for start in (m.start() for m in _JSON_START.finditer(text)):
        if start < position:
            continue  # inside a value already decoded
        try:
            value, end = decoder.raw_decode(text, start)
        except (json.JSONDecodeError, RecursionError):  # "[[[[…" nests past the decoder's recursion limit
            failures += 1
            if failures >= _MAX_JSON_FAILURES:
                break
            continue
        found.extend(_boxes_in_value(value))
        position = end
    return found


def _internvl_boxes(text: str) -> list[RawBox]:
    found: list[RawBox] = []
    for match in _INTERNVL.finditer(text):
        try:
            value = json.loads(match.group(1))
        except json.JSONDecodeError:
            continue
        items = value if value and isinstance(value[0], list) else [value]
        found.extend(b for b in map(_as_box, items) if b is not None)
    return found


def _regex_boxes(pattern: re.Pattern[str], text: str) -> list[RawBox]:
    return [tuple(float(g) for g in m.groups()) for m in pattern.finditer(text)]  # type: ignore[misc]


_READERS = (
    ("json", _json_boxes),
    ("qwen_box_tokens", lambda t: _regex_boxes(_QWEN_TOKENS, t)),
    ("internvl_box", _internvl_boxes),
    ("point_pair", lambda t: _regex_boxes(_POINT_PAIR, t)),
    ("bracketed_list", lambda t: _regex_boxes(_BRACKETED, t)),
)
# A line that announces the final answer: the boxes after the last one are the answer, those
# before it drafts ("Reason about the location before providing the final answer").
_FINAL_MARKER = re.compile(
    r"(?im)^[ \t>#*_\-]*(?:final\s+(?:answer|boxe?s?|bounding\s+box(?:es)?|result|output|detections?|localization)\b"
    r"|(?:answer|最终答案|答案|antwort|réponse|respuesta|答え)\s*[:：])"
)


def _boxes_in(text: str) -> BoxExtraction:
    """All boxes of the first source (in the order above) that has any."""
    for path, reader in _READERS:
        boxes = reader(unwrap_code_fences(text))
        if boxes:
            return BoxExtraction(tuple(boxes), path)
    return BoxExtraction((), "none")


def _final_scope(text: str) -> tuple[str, str]:
    """The part of the reply that is its final answer, and how it was chosen.

    After the last final-answer marker that still has boxes after it; else the last code block
    that holds boxes when there are several (earlier blocks are drafts); else the whole reply.
    Markers after the reply's last box-like number group are passed over without a search (a reply
    repeating "Answer:" a hundred thousand times costs one pass, not one pass per marker).
    """
    last_box = max((m.end() for pattern in _BOX_LIKE for m in deque(pattern.finditer(text), maxlen=1)), default=-1)
    markers = [m for m in _FINAL_MARKER.finditer(text) if m.start() < last_box]
    for marker in reversed(markers[-_MAX_MARKERS:]):
        if _boxes_in(text[marker.start():]).found:
            return text[marker.start():], "after_final_marker"
    blocks = [text[start:end] for start, end in code_blocks(text)[-_MAX_MARKERS:] if _boxes_in(text[start:end]).found]
    if len(blocks) > 1:
        return blocks[-1], "last_code_block"
    return text, ""


# every box source ends in one of these: four numbers in a row (JSON, brackets, tokens, point pairs)
_BOX_LIKE = (re.compile(r"-?\d+(?:\.\d+)?\s*[,)\]]\s*\(?\s*-?\d+(?:\.\d+)?\s*[)\]}>]"),)
_MAX_MARKERS = 16


def extract_boxes(output: str | None, reasoning: ReasoningMarkers = DEFAULT_REASONING) -> BoxExtraction:
    """The boxes of the reply's final answer: the model family's reasoning blocks are dropped first
    (an unclosed block means no answer), then drafts before the final answer (:func:`_final_scope`);
    within the answer, all boxes of the first source (in the order above) that has any. None found
    is ``path="none"``; a path ending ``:after_final_marker`` or ``:last_code_block`` says drafts were
    left out."""
    text = strip_reasoning(output or "", reasoning, unwrap_fences=False)
    scope, how = _final_scope(text)
    found = _boxes_in(scope)
    return BoxExtraction(found.boxes, f"{found.path}:{how}") if found.found and how else found


def parse_box_string(text: str) -> RawBox | None:
    """A gold box string ``"[x1, y1, x2, y2]"`` (the release's ``answer`` for detection) as numbers."""
    match = _BRACKETED.fullmatch(text.strip())
    return tuple(float(g) for g in match.groups()) if match else None  # type: ignore[return-value]
