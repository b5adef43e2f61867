"""Strict parser for closed (multiple-choice) answers: read what a careful person reads, never guess.

The parser returns one of *this sample's* option labels (``A`` … up to the number of options)
or "unparseable". It never asks a judge, never guesses and never picks the nearest option: an
answer it cannot read is a wrong answer (DESIGN §4 "Scoring").

Reasoning blocks (per model family) are stripped first, then LaTeX and Markdown wrappers around
what they wrap. The reply's *commitments* are then collected, each read by one rule:

* ``json_answer``  ``{"answer": "C"}``;
* ``answer_tag``   ``<answer>C</answer>``, ``\\boxed{C}``, GLM's box tokens;
* ``answer_field`` ``Answer: C``, ``**Final Answer:** C``, ``答案：C``, ``Antwort: C`` …, also mid-line and as
  a heading with the answer on the next line;
* ``final_phrase`` "the answer is (C)", "I'd go with C", "答案是 C", "정답은 C", "La respuesta es C" …;
* ``label_first``  "C is the most likely answer", "(C) ist richtig";
* ``copula``       "the most likely diagnosis is (C)", "… is **C) nucleus**", "actually it's C";
* ``last_line``    a label alone on the last line after prose.

The **last** commitment wins (a model that corrects itself means its correction). A commitment
that names two options is a hedge and is unparseable; an explicit answer field or tag that names
nothing (``Answer: I am not sure``) withdraws what came before it, though later commitments still
count. A phrase, label-first verdict or copula whose clause denies it ("I don't think the answer is A",
"I doubt that A is correct") is no commitment, and "it is not A" said of the label last committed to takes that
answer back (``retracted``). Only when a reply commits nowhere are two fallbacks tried: its first line as a whole
(``response``: "B", "B. Monocyte", an option's exact text) and the first item of an ordered list
(``ordered_list``). The parse path is ``rule:form`` or ``unparseable:rule:reason``.
"""
from __future__ import annotations

import bisect
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from ._labels import Resolution, bare_answer, clean_candidate, option_labels, resolve_candidate
from ._stated import first_sentence, stated_text
from ._markers import (COPULAS, DENIALS, FIELD_KEYS, FILLERS, JOINED_VERDICT_TAILS, LABEL_FIRST_TAILS,
                       NOT_ANSWER_SUBJECTS, PHRASES, STEMS)
from ._text import DEFAULT_REASONING, ReasoningMarkers, plain_markup, strip_reasoning

UNPARSEABLE = "unparseable"


@dataclass(frozen=True)
class ClosedParse:
    """The parser's reading of one closed answer.

    ``label`` is an option label of the sample or ``None``; ``path`` says which rule read it, as
    ``rule:form`` (e.g. ``answer_field:label_with_text``) or ``unparseable:reason``.
    """

    label: str | None
    path: str

    @property
    def parsed(self) -> bool:
        return self.label is not None

    @property
    def rule(self) -> str:
        """The rule that read the label (or the one whose reading made the reply unparseable)."""
        parts = self.path.split(":")
        return parts[1] if parts[0] == UNPARSEABLE and len(parts) > 2 else parts[0]


# --- finding commitments (independent of the options, cached per reply) ----------------------

_KEYS = "|".join(FIELD_KEYS)
_LINE_START = r"^[ \t>#*_\-•]*"
# The value is captured inside a lookahead: a later marker on the same line ("Answer: A … Actually, the
# answer is B") must still be found.
_FIELD = re.compile(r"(?<![A-Za-z])(?:" + _KEYS + r")s?[ \t]*[:=][ \t]*(?=([^\n]*))", re.IGNORECASE | re.MULTILINE)
_HEADING = re.compile(_LINE_START + r"(?:" + _KEYS + r")s?[ \t#*:]*$", re.IGNORECASE | re.MULTILINE)
_PHRASE = re.compile(r"(?<![A-Za-z])(?:" + "|".join(PHRASES) + r")[ \t]*[:=]?[ \t]*(?=([^\n]*))", re.IGNORECASE)
_LABEL_TOKEN = r"(?:(?i:option|choice|answer|选项|옵션)\s*)?(?:[(\[]([A-Z])[)\]]|(?<![A-Za-z0-9])([A-Z])\)|(?<![A-Za-z0-9'’])([A-Z])(?![A-Za-z0-9'’]))"
_LABEL_FIRST = re.compile(_LABEL_TOKEN + r"[ \t]*(?i:" + "|".join(LABEL_FIRST_TAILS) + r")")
# "- **B) brain hemorrhage** — ✅ Correct.": one option marked correct while going through them
_MARKED_CORRECT = re.compile(
    r"^[ \t>*\-•]*" + _LABEL_TOKEN + r"[^\n]*?\s[—–:\-]+\s*(?:✅|✔️?|☑️?)?\s*(?i:correct|right|richtig|korrekt|正确)\b"
    r"(?!\s+(?i:if|only|but))",
    re.MULTILINE,
)
_JOINED_VERDICT = re.compile(
    r"((?:[(\[][A-Z][)\]]|(?<![A-Za-z0-9])[A-Z](?![A-Za-z0-9]))(?:\s*(?:,|、|，|\band\b|\bund\b|和|及)\s*"
    r"(?:[(\[][A-Z][)\]]|(?<![A-Za-z0-9])[A-Z](?![A-Za-z0-9])))+)[ \t]*(?i:" + "|".join(JOINED_VERDICT_TAILS) + r")"
)
_FILLER_ONLY = re.compile(r"^\W*(?:" + FILLERS + r"\W*)*$", re.IGNORECASE)
_SEPARATOR = re.compile(r"^[\s\-–—_*=~#.:|]*$")
# "it's (C)" / "that's C" too: the contraction is what a model that corrects itself writes ("Wait, actually it's B.")
_COPULA = re.compile(
    r"(?:(?<![A-Za-z])" + COPULAS + r"|(?:(?<=\b[Ii]t)|(?<=\b[Tt]hat))['’]s)[ \t]*[:：]?(?:[ \t]*\n){0,2}[ \t]*"
    r"(?=((?:(?i:option|choice)\s+)?(?:[(\[][A-Z][)\]]|[A-Z](?:[).:](?=\s|$)|(?=[ \t]*(?:[,;。!]|\.(?!\w)|$))))[^\n]*))",
    re.MULTILINE,
)
_NOT_ANSWER_SUBJECT = re.compile(NOT_ANSWER_SUBJECTS, re.IGNORECASE)
_CLAUSE_START = re.compile(r"[.!?;\n。！？；][^.!?;\n。！？；]*$")
_DENIAL = re.compile(DENIALS, re.IGNORECASE)
_ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.IGNORECASE | re.DOTALL)
_ANSWER_TAG_MARKUP = re.compile(r"</?answer>", re.IGNORECASE)
_FIELD_PREFIX = re.compile(r"^\s*(?:" + _KEYS + r")s?\s*[:=]\s*", re.IGNORECASE)
_ANSWER_KEYS = ("answer", "final_answer", "final answer", "correct_answer")
_LIST_ITEM = re.compile(r"^[ \t]*(?:\d+[.)]|[-*•])[ \t]+(.+)$", re.MULTILINE)
_LINE_LABEL = re.compile(r"^[ \t*]*[(\[]?([A-Z])[)\].:][ \t]", re.MULTILINE)
_LONE_LABEL_ITEM = re.compile(r"^[\s*_]*[(\[]?[A-Z][)\].:]?[\s*_]*$")
_BULLET = re.compile(r"^[ \t]*(?:[-*•+]|\d+[.)])[ \t]")

# rules reading the same place: the more explicit one (higher here) is taken as the later and names the path
_EXPLICITNESS = {"retraction": -1, "last_line": 0, "copula": 1, "label_first": 2, "final_phrase": 3, "json_answer": 4,
                 "answer_tag": 5, "answer_field": 6}
# "it is not A", "it's not (A)": said of the label the reply last committed to, it takes that answer back
_RETRACTION = re.compile(r"\b(?:[Ii]t|[Tt]hat)(?:\s+is|['’]s)\s+not\s+(?:(?i:option|choice)\s+)?[(\[]?([A-Z])[)\]]?"
                         r"(?![A-Za-z0-9])")
_FIELD_RULES = ("answer_field", "answer_tag", "json_answer")


@dataclass(frozen=True)
class _Commitment:
    position: int         # where the candidate starts in the cleaned reply
    rule: str
    candidate: str
    withdraws: bool = False  # an explicit field or tag at the start of a line: naming nothing withdraws what came before


@dataclass(frozen=True)
class _Scan:
    empty: bool
    text: str = ""                         # the reply without reasoning and markup
    commitments: tuple[_Commitment, ...] = ()
    first_line: str | None = None          # the reply's first non-empty line, unless it is a list item
    other_line_labels: frozenset[str] = frozenset()  # letters starting later lines ("B. …")
    list_items: tuple[str, ...] = ()
    single_line: bool = False


def _next_line(text: str, end: int) -> tuple[int, str]:
    """The first non-empty line after `end` (a value written under its marker)."""
    rest = text[end:]
    stripped = rest.lstrip("\n \t")
    line = stripped.split("\n", 1)[0]
    return end + len(rest) - len(stripped), line


def _value(text: str, match: re.Match[str], group: int = 1) -> tuple[int, str]:
    """The words after a marker, or the next line when the marker ends its line ("is:", "ist also:")."""
    value = _ANSWER_TAG_MARKUP.sub(" ", match.group(group))  # "Answer: (C)</answer>" inside \boxed{}
    if clean_candidate(value) and not _FILLER_ONLY.match(value):
        return match.start(group), value
    return _next_line(text, match.start(group) + len(value))


def _at_line_start(text: str, position: int) -> bool:
    line_start = text.rfind("\n", 0, position) + 1
    return re.fullmatch(r"[ \t>#*_\-•\d.)]*", text[line_start:position]) is not None


def _json_answers(text: str) -> list[_Commitment]:
    decoder = json.JSONDecoder()
    found: list[_Commitment] = []
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
                    candidate = item if isinstance(item, str) else json.dumps(item)
                    found.append(_Commitment(position, "json_answer", candidate, withdraws=True))
        position = text.find("{", end)
    return found


def _hot_lines(text: str) -> list[tuple[int, int]]:
    """(start, end) of the lines that contain a marker stem (str.find per stem: far cheaper than a regex)."""
    low = text.lower()
    starts = [0] + [m.end() for m in re.finditer("\n", text)]
    hot: set[int] = set()
    for stem in STEMS:
        position = low.find(stem)
        while position != -1:
            line = bisect.bisect_right(starts, position) - 1
            hot.add(line)
            position = low.find(stem, starts[line + 1] if line + 1 < len(starts) else len(low))
    ends = [start - 1 for start in starts[1:]] + [len(text)]
    return [(starts[line], ends[line]) for line in sorted(hot)]


def _in_spans(pattern: re.Pattern[str], text: str, spans: list[tuple[int, int]]) -> list[re.Match[str]]:
    """The matches of `pattern` that start on the lines in `spans` (each searched on its own)."""
    return [m for start, end in spans for m in pattern.finditer(text, start, end)]


def _fields(text: str, spans: list[tuple[int, int]]) -> list[_Commitment]:
    found = []
    for match in _in_spans(_FIELD, text, spans):
        position, value = _value(text, match)
        found.append(_Commitment(position, "answer_field", value, withdraws=_at_line_start(text, match.start())))
    for match in _in_spans(_HEADING, text, spans):
        position, value = _next_line(text, match.end())
        found.append(_Commitment(position, "answer_field", value, withdraws=True))
    return found


def _tags(text: str) -> list[_Commitment]:
    found = []
    for match in _ANSWER_TAG.finditer(text):
        body = _FIELD_PREFIX.sub("", match.group(1))  # \boxed{\text{Answer: (J)}}
        found.append(_Commitment(match.start(1), "answer_tag", body, withdraws=True))
    return found


def _denied(text: str, start: int) -> bool:
    """Whether the clause that leads to `start` denies what follows ("I don't think the answer is A")."""
    before = text[max(0, start - 120): start]
    boundary = _CLAUSE_START.search(before)
    return bool(_DENIAL.search(before[boundary.start() + 1:] if boundary else before))


def _phrases(text: str, spans: list[tuple[int, int]]) -> list[_Commitment]:
    found = []
    for match in _in_spans(_PHRASE, text, spans):
        if _denied(text, match.start()):
            continue
        position, value = _value(text, match)
        found.append(_Commitment(position, "final_phrase", value))
    return found


def _labels_first(text: str, spans: list[tuple[int, int]]) -> list[_Commitment]:
    found = []
    for match in (*_in_spans(_LABEL_FIRST, text, spans), *_in_spans(_MARKED_CORRECT, text, spans)):
        if _denied(text, match.start()):
            continue
        label = next(g for g in match.groups()[:3] if g)
        found.append(_Commitment(match.start(), "label_first", label))
    return found


def _joined_verdicts(text: str, spans: list[tuple[int, int]]) -> list[_Commitment]:
    return [_Commitment(m.start(1), "label_first", m.group(1)) for m in _in_spans(_JOINED_VERDICT, text, spans)]


def _copulas(text: str) -> list[_Commitment]:
    found = []
    for match in _COPULA.finditer(text):
        before = text[max(0, match.start() - 40): match.start()]
        if _NOT_ANSWER_SUBJECT.search(before) or _denied(text, match.start()):
            continue
        found.append(_Commitment(match.start(1), "copula", match.group(1)))
    return found


def _last_line(lines: list[str], other_line_labels: frozenset[str]) -> list[_Commitment]:
    """A label alone on the last line, after prose (not after a list of options)."""
    if len(lines) < 2 or other_line_labels or _BULLET.match(lines[-1][1]):
        return []  # "*   **A)" is a list cut off, not an answer
    last = clean_candidate(lines[-1][1])
    if re.fullmatch(r"(?:(?i:option|choice)\s*)?[(\[]?[A-Z][)\]]?[.。]?", last):
        return [_Commitment(lines[-1][0], "last_line", last)]
    return []


@lru_cache(maxsize=1 << 16)
def _scan(output: str, markers: ReasoningMarkers) -> _Scan:
    """Everything about a reply that does not depend on the options, once per distinct reply."""
    text = plain_markup(strip_reasoning(output, markers))
    if not text.strip():
        return _Scan(empty=True)
    lines = [(m.start(), m.group()) for m in re.finditer(r"[^\n]+", text) if not _SEPARATOR.match(m.group())]
    other_labels = frozenset(m.group(1) for m in _LINE_LABEL.finditer("\n".join(line for _, line in lines[1:])))
    hot = _hot_lines(text)
    commitments = (_json_answers(text) + _fields(text, hot) + _tags(text) + _phrases(text, hot)
                   + _labels_first(text, hot) + _joined_verdicts(text, hot) + _copulas(text)
                   + _last_line(lines, other_labels)
                   + [_Commitment(m.start(1), "retraction", m.group(1)) for m in _RETRACTION.finditer(text)])
    commitments.sort(key=lambda c: (c.position, _EXPLICITNESS[c.rule]))
    first = lines[0][1] if lines and not _LIST_ITEM.match(lines[0][1]) else None
    return _Scan(
        empty=False,
        text=text,
        commitments=tuple(commitments),
        first_line=first,
        other_line_labels=other_labels,
        list_items=tuple(m.group(1) for m in _LIST_ITEM.finditer(text)),
        single_line=len(lines) == 1,
    )


# --- reading them against this sample's options ---------------------------------------------

def _read(commitment: _Commitment, options: tuple[str, ...]) -> Resolution:
    return resolve_candidate(commitment.candidate, options, field=commitment.rule in _FIELD_RULES)


# Loose rules that name this many different options are an option-by-option review, not an answer.
_REVIEW = {"label_first": 2, "copula": 3}


def _reviews(readings: list[tuple[_Commitment, Resolution]]) -> set[str]:
    """The loose rules whose readings go through the options one by one ("(A) is correct. (C) is correct.")."""
    named: dict[str, set[str]] = {}
    for commitment, reading in readings:
        if commitment.rule in _REVIEW and reading.label is not None:
            named.setdefault(commitment.rule, set()).add(reading.label)
    return {rule for rule, labels in named.items() if len(labels) >= _REVIEW[rule]}


def _committed(scan: _Scan, options: tuple[str, ...]) -> ClosedParse | None:
    """The last commitment that names something (after the last withdrawal), or None."""
    readings = [(c, _read(c, options)) for c in scan.commitments]
    reviews = _reviews(readings)
    readings = [(c, r) for c, r in readings if c.rule not in reviews]
    if reviews and not any(r.names_something for _, r in readings):
        # "(A) is correct. (C) is correct.": a verdict on each option, and no answer after it
        return _finish(sorted(reviews)[0], Resolution(None, "option_review"))
    withdrawn, last_label = None, None
    for commitment, reading in readings:
        if commitment.rule == "retraction":
            if reading.label is not None and reading.label == last_label:  # "Answer: A … it is not A."
                withdrawn, last_label = (commitment, Resolution(None, "retracted")), None
        elif commitment.withdraws and not reading.names_something:
            withdrawn, last_label = (commitment, reading), None
        elif reading.names_something:
            last_label = reading.label
    start = withdrawn[0].position if withdrawn else -1
    standing = [(c, r) for c, r in readings
                if c.position > start and r.names_something and c.rule != "retraction"]
    if not standing:
        return _finish(withdrawn[0].rule, withdrawn[1]) if withdrawn else None
    commitment, reading = standing[-1]
    return _finish(commitment.rule, reading)


def _whole_response(scan: _Scan, options: tuple[str, ...]) -> Resolution | None:
    if scan.first_line is None:
        return None  # a list: the list fallback decides
    resolution = resolve_candidate(scan.first_line, options)
    if not resolution.names_something:
        return None
    if resolution.label is not None:
        # "A. Monocyte\nB. Promyelocyte…": the options read back, not an answer.
        if scan.other_line_labels & (set(option_labels(len(options))) - {resolution.label}):
            return Resolution(None, "multiple_labels")
    return resolution


def _ordered_list(scan: _Scan, options: tuple[str, ...]) -> Resolution | None:
    """A reply that is one list item ("- C) clipping vas deferens"). Longer lists that name
    options go through them ("- **A) …** — unlikely because …"): they are reviews, not answers."""
    items = scan.list_items
    if not items:
        return None
    readings = [resolve_candidate(item, options) for item in items]
    named = {r.label for r in readings if r.label is not None}
    if len(items) == 1:
        # the reply's one list item is its answer only when it holds nothing but the answer, and a
        # bare label ("*   **A)") only when it is the whole reply (after prose it is a list cut off)
        bare = bare_answer(items[0], options) and (scan.single_line or not _LONE_LABEL_ITEM.match(items[0]))
        return readings[0] if bare else None
    if len(named) > 1:
        labels = option_labels(len(options))
        if len(items) >= len(labels) and tuple(r.label for r in readings[: len(labels)]) == labels:
            return Resolution(None, "option_echo")  # the model listed the options back, in order
        return Resolution(None, "multiple_labels")
    return None


def parse_closed_answer(output: str | None, options: Sequence[str],
                        reasoning: ReasoningMarkers = DEFAULT_REASONING) -> ClosedParse:
    """Read `output` as one of the labels of `options` (``A`` for the first, …) or unparseable.

    `options` are the sample's option texts in presentation order; `reasoning` the model family's
    reasoning markers (stripped before parsing). The returned ``path`` names the rule that read
    the label (``rule:form``) or why there is none (``unparseable:…``).
    """
    scan = _scan(output if isinstance(output, str) else "", reasoning)
    if scan.empty:
        return ClosedParse(None, f"{UNPARSEABLE}:empty_output")
    options = tuple(options)
    committed = _committed(scan, options)
    if committed is not None:
        return committed
    readers = (("response", _whole_response), ("response", lambda s, o: first_sentence(s.text, o)),
               ("stated_text", lambda s, o: stated_text(s.text, o)), ("ordered_list", _ordered_list))
    retracted = {c.candidate for c in scan.commitments if c.rule == "retraction"}
    for rule, reader in readers:
        resolution = reader(scan, options)
        if resolution is not None:
            if resolution.label in retracted:  # "A\nIt is not A": the reply takes back what its first line says
                return _finish(rule, Resolution(None, "retracted"))
            return _finish(rule, resolution)
    return ClosedParse(None, f"{UNPARSEABLE}:no_answer")


def _finish(rule: str, resolution: Resolution) -> ClosedParse:
    if resolution.label is None:
        return ClosedParse(None, f"{UNPARSEABLE}:{rule}:{resolution.form}")
    return ClosedParse(resolution.label, f"{rule}:{resolution.form}")
