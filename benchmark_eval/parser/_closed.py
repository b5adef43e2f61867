"""Strict, layered parser for closed (multiple-choice) answers.

The parser returns one of *this sample's* option labels (``A`` … up to the number of options)
or "unparseable". It never asks a judge, never guesses and never picks the nearest option: an
answer it cannot read is a wrong answer (DESIGN §4 "Scoring"). Layers, first hit wins:

1. explicit answer field: JSON ``{"answer": …}`` and ``Answer:`` / ``ANSWER:`` / ``Final answer:``
   lines — the last one in the text wins;
2. format tags: ``<answer>…</answer>`` and ``\\boxed{…}`` — the last one wins;
3. final-answer phrases: "the answer is (B)", "I choose B", "B is correct" — the last one wins;
4. the response itself: a label alone ("B", "(b)", "**B**") or with its text ("B. Monocyte"),
   or exactly one option's text;
5. an ordered or bulleted list: its first item.

Once a layer finds a candidate, its verdict is final: ``Answer: F`` on a five-option question is
unparseable even if a lower layer would have found a letter. The path taken is recorded.
"""
from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from ._text import normalise_label_text, strip_reasoning

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
UNPARSEABLE = "unparseable"


@lru_cache(maxsize=None)
def option_labels(option_count: int) -> tuple[str, ...]:
    """The labels of a question with `option_count` options: ``A``, ``B``, …"""
    if not 0 < option_count <= len(LETTERS):
        raise ValueError(f"a closed question needs 1 to {len(LETTERS)} options, got {option_count}")
    return tuple(LETTERS[:option_count])


@dataclass(frozen=True)
class ClosedParse:
    """The parser's reading of one closed answer.

    ``label`` is an option label of the sample or ``None``; ``path`` says how it was found, as
    ``layer:form`` (e.g. ``answer_field:label_with_text``) or ``unparseable:reason``.
    """

    label: str | None
    path: str

    @property
    def parsed(self) -> bool:
        return self.label is not None


@dataclass(frozen=True)
class _Resolution:
    label: str | None
    form: str  # how the label was read, or why it could not be


# --- candidate resolution -------------------------------------------------------------------

_EMPHASIS = re.compile(r"[*`]+|(?<!\w)_+|_+(?!\w)")
_QUOTES = "\"'“”‘’«»"
_LETTER_ONLY = re.compile(
    r"^(?:(?:option|choice|answer)\s*)?[(\[]?\s*([A-Za-z])\s*[)\]]?\s*[.:;,!]?$", re.IGNORECASE
)
# "B. Monocyte", "B) Monocyte", "(b) monocyte", "Option B: Monocyte"; a bare "A" followed by a
# space is not here on purpose: "A cell in the centre…" starts with an article.
_LETTER_WITH_TEXT = re.compile(
    r"^(?:(?i:option|choice)\s*)?(?:[(\[]\s*([A-Za-z])\s*[)\]]|([A-Z])\s*(?:[.:)]|\s[-–—])|([A-Za-z])\))\s*(.+)$",
    re.DOTALL,
)
_LETTER_THEN_WORDS = re.compile(r"^([A-Z])\s+(.+)$", re.DOTALL)
# "B, because …": a label closed by a comma or semicolon; group 2 keeps the separator.
_LEADING_LETTER = re.compile(r"^[(\[]?([A-Z])[)\]]?(\s*[,;].*)$", re.DOTALL)
# A second label joined to the first: "B or C", "(B) and (C)", "B, C", "B/C".
_JOINED_LABEL = re.compile(
    r"^\s*(?:,|;|/|&|\+|\b(?i:and|or)\b)\s*(?:(?i:option|choice)\s+)?[(\[]?([A-Z])(?![A-Za-z])(?!\s+[a-z])"
)
_LINE_LABEL = re.compile(r"^[ \t*]*[(\[]?([A-Z])[)\].:][ \t]", re.MULTILINE)
_ARTICLE = re.compile(r"^(?:a|an|the)\s+", re.IGNORECASE)


def _clean(candidate: str) -> str:
    text = _EMPHASIS.sub("", candidate).strip()
    return text.strip(_QUOTES).strip()


@lru_cache(maxsize=1 << 14)
def _unique_option_texts(options: tuple[str, ...]) -> dict[str, int]:
    """Normalised option text → option index, for texts that occur once among the options."""
    normalised = [normalise_label_text(o) for o in options]
    return {n: i for i, n in enumerate(normalised) if n and normalised.count(n) == 1}


def _option_by_text(text: str, options: Sequence[str], labels: Sequence[str]) -> str | None:
    """The label whose normalised option text equals `text` (with or without a leading article)."""
    by_text = _unique_option_texts(tuple(options))
    stripped = text.rstrip(".")
    hits = {by_text.get(normalise_label_text(stripped)), by_text.get(normalise_label_text(_ARTICLE.sub("", stripped)))}
    hits.discard(None)
    return labels[hits.pop()] if len(hits) == 1 else None


def _joined_label(text: str, chosen: str, labels: Sequence[str]) -> bool:
    """Whether `text` (what follows the chosen label) starts by naming a second, different label."""
    match = _JOINED_LABEL.match(text)
    return bool(match) and match.group(1) in labels and match.group(1) != chosen


def _strip_option_text(rest: str, option_text: str) -> str:
    """`rest` without a leading copy of the chosen option's text (so its own letters are not mentions)."""
    pattern = r"\W*".join(re.escape(word) for word in normalise_label_text(option_text).split())
    match = re.match(r"\W*" + pattern + r"(?!\w)", rest, re.IGNORECASE) if pattern else None
    return rest[match.end():] if match else rest


def _with_text(letter: str, rest: str, options: Sequence[str], labels: Sequence[str]) -> _Resolution:
    if letter not in labels:
        return _Resolution(None, "invalid_label")
    by_text = _option_by_text(rest, options, labels)
    if by_text is not None and by_text != letter:
        return _Resolution(None, "conflicting_text")
    if by_text == letter:
        return _Resolution(letter, "label_with_text")
    tail = _strip_option_text(rest, options[labels.index(letter)])
    if _joined_label(tail, letter, labels):
        return _Resolution(None, "multiple_labels")
    return _Resolution(letter, "label_with_text")


def resolve_candidate(candidate: str, options: Sequence[str]) -> _Resolution:
    """Read one candidate answer string (a field value, a tag body, a line) as an option label.

    Exact option text is tried first, so an option such as "E. coli" is never read as label E.
    """
    labels = option_labels(len(options))
    text = _clean(candidate)
    if not text:
        return _Resolution(None, "empty_answer")
    if (by_text := _option_by_text(text, options, labels)) is not None:
        return _Resolution(by_text, "option_text")
    if match := _LETTER_ONLY.match(text):
        letter = match.group(1).upper()
        return _Resolution(letter, "label") if letter in labels else _Resolution(None, "invalid_label")
    if match := _LETTER_WITH_TEXT.match(text):
        letter = next(g for g in match.groups()[:3] if g).upper()
        return _with_text(letter, match.group(4), options, labels)
    if (match := _LETTER_THEN_WORDS.match(text)) and match.group(1) in labels:
        letter = match.group(1)
        if normalise_label_text(match.group(2).rstrip(".")) == normalise_label_text(options[labels.index(letter)]):
            return _Resolution(letter, "label_with_text")
    if match := _LEADING_LETTER.match(text):
        letter = match.group(1)
        if letter not in labels:
            return _Resolution(None, "invalid_label")
        if _joined_label(match.group(2), letter, labels):
            return _Resolution(None, "multiple_labels")
        return _Resolution(letter, "label")
    return _Resolution(None, "no_label")


# --- layers ---------------------------------------------------------------------------------

_ANSWER_LINE = re.compile(
    r"^[ \t>#*_-]*(?:(?:final|correct|best)[ \t]+(?:answer|option|choice)|answer)[ \t*_]*[:=][ \t]*(.*)$",
    re.IGNORECASE | re.MULTILINE,
)
_ANSWER_KEYS = ("answer", "final_answer", "final answer")
_ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.IGNORECASE | re.DOTALL)
_BOXED = re.compile(r"\\boxed\{((?:[^{}]|\{[^{}]*\})*)\}")
_TEX_WRAPPER = re.compile(r"\\(?:text|mathrm|textbf|mathbf)\{([^{}]*)\}")
_PHRASES = (
    re.compile(
        r"\b(?:the\s+)?(?:final\s+|correct\s+|best\s+|right\s+|most\s+\w+\s+)?(?:answer|option|choice)\s+"
        r"(?:is|would\s+be|should\s+be)\s*:?\s*(.+)$",
        re.IGNORECASE | re.MULTILINE,
    ),
    re.compile(r"\bI\s+(?:would\s+)?(?:choose|select|pick|go\s+with)\s*:?\s+(.+)$", re.IGNORECASE | re.MULTILINE),
    re.compile(
        r"^[ \t*]*((?:option\s+)?[(\[]?[A-Z][)\]]?)[ \t*]+is\s+(?:the\s+)?(?:correct|right|best)\b", re.MULTILINE
    ),
)
_LIST_ITEM = re.compile(r"^[ \t]*(?:\d+[.)]|[-*•])[ \t]+(.+)$", re.MULTILINE)


def _json_answers(text: str) -> list[tuple[int, str]]:
    """(position, value) of every ``answer`` key in the JSON objects embedded in `text`."""
    decoder = json.JSONDecoder()
    found: list[tuple[int, str]] = []
    position = text.find("{")
    while position != -1:
        try:
            value, end = decoder.raw_decode(text, position)
        except json.JSONDecodeError:
            position = text.find("{", position + 1)
            continue
        if isinstance(value, dict):
            for key, item in value.items():
                if str(key).strip().lower() in _ANSWER_KEYS:
                    if isinstance(item, list) and len(item) == 1:
                        item = item[0]
                    found.append((position, item if isinstance(item, str) else json.dumps(item)))
        position = text.find("{", end)
    return found


def _answer_lines(text: str) -> list[tuple[int, str]]:
    found = []
    for match in _ANSWER_LINE.finditer(text):
        value = match.group(1).strip()
        if not _clean(value):  # "Answer:" with the answer on the next non-empty line
            following = text[match.end():].lstrip("\n").split("\n", 1)[0]
            value = following
        found.append((match.start(), value))
    return found


def _tags(text: str) -> list[tuple[int, str]]:
    found = [(m.start(), m.group(1)) for m in _ANSWER_TAG.finditer(text)]
    for match in _BOXED.finditer(text):
        found.append((match.start(), _TEX_WRAPPER.sub(r"\1", match.group(1))))
    return found


def _phrases(text: str) -> list[tuple[int, str]]:
    found = []
    for pattern in _PHRASES:
        found.extend((m.start(1), m.group(1)) for m in pattern.finditer(text))
    return found


def _last(candidates: list[tuple[int, str]]) -> str:
    return max(candidates, key=lambda item: item[0])[1]


@dataclass(frozen=True)
class _Layers:
    """What each layer found in a reply, before looking at the options (so it can be cached per reply)."""

    empty: bool
    answer_field: str | None = None
    answer_tag: str | None = None
    phrases: tuple[str, ...] = ()          # in text order
    first_line: str | None = None          # the reply's first non-empty line, unless it is a list item
    other_line_labels: frozenset[str] = frozenset()  # letters starting later lines ("B. …")
    list_items: tuple[str, ...] = ()


@lru_cache(maxsize=1 << 16)
def _layers(output: str) -> _Layers:
    """Run the option-independent part of every layer once per distinct reply."""
    text = strip_reasoning(output)
    if not text:
        return _Layers(empty=True)
    fields = _json_answers(text) + _answer_lines(text)
    tags = _tags(text)
    phrases = sorted(_phrases(text))
    lines = [line for line in text.splitlines() if line.strip()]
    first = lines[0] if lines and not _LIST_ITEM.match(lines[0]) else None
    return _Layers(
        empty=False,
        answer_field=_last(fields) if fields else None,
        answer_tag=_last(tags) if tags else None,
        phrases=tuple(candidate for _, candidate in phrases),
        first_line=first,
        other_line_labels=frozenset(m.group(1) for m in _LINE_LABEL.finditer("\n".join(lines[1:]))),
        list_items=tuple(m.group(1) for m in _LIST_ITEM.finditer(text)),
    )


def _whole_response(layers: _Layers, options: Sequence[str]) -> _Resolution | None:
    if layers.first_line is None:
        return None  # empty, or a list: the list layer decides
    resolution = resolve_candidate(layers.first_line, options)
    if resolution.form == "no_label":
        return None
    if resolution.label is not None:
        # "A. Monocyte\nB. Promyelocyte…": the options read back, not an answer.
        if layers.other_line_labels & (set(option_labels(len(options))) - {resolution.label}):
            return _Resolution(None, "multiple_labels")
    return resolution


def _ordered_list(layers: _Layers, options: Sequence[str]) -> _Resolution | None:
    items = layers.list_items
    if not items:
        return None
    labels = option_labels(len(options))
    readings = [resolve_candidate(item, options).label for item in items[: len(labels)]]
    if len(items) >= len(labels) and tuple(readings) == labels:
        return _Resolution(None, "option_echo")  # the model listed the options back, in order
    first = resolve_candidate(items[0], options)
    return first if first.form != "no_label" else None


def parse_closed_answer(output: str | None, options: Sequence[str]) -> ClosedParse:
    """Read `output` as one of the labels of `options` (``A`` for the first, …) or unparseable.

    `options` are the sample's option texts in presentation order. The returned ``path`` is
    ``layer:form`` for a label and ``unparseable:reason`` otherwise.
    """
    layers = _layers(output if isinstance(output, str) else "")
    if layers.empty:
        return ClosedParse(None, f"{UNPARSEABLE}:empty_output")
    options = tuple(options)
    if layers.answer_field is not None:
        return _finish("answer_field", resolve_candidate(layers.answer_field, options))
    if layers.answer_tag is not None:
        return _finish("answer_tag", resolve_candidate(layers.answer_tag, options))
    # A phrase is a loose match ("this option is unlikely"): only phrases that name something
    # count, and the last of those wins.
    for candidate in reversed(layers.phrases):
        resolution = resolve_candidate(candidate, options)
        if resolution.form != "no_label":
            return _finish("final_phrase", resolution)
    for layer, reader in (("response", _whole_response), ("ordered_list", _ordered_list)):
        resolution = reader(layers, options)
        if resolution is not None:
            return _finish(layer, resolution)
    return ClosedParse(None, f"{UNPARSEABLE}:no_answer")


def _finish(layer: str, resolution: _Resolution) -> ClosedParse:
    if resolution.label is None:
        return ClosedParse(None, f"{UNPARSEABLE}:{layer}:{resolution.form}")
    return ClosedParse(resolution.label, f"{layer}:{resolution.form}")
