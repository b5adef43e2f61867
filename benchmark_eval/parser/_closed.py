"""Strict parser for closed (multiple-choice) answers: read what a careful person reads, never guess.

The parser returns one of *this sample's* option labels (``A`` … up to the number of options)
or "unparseable". It never asks a judge, never guesses and never picks the nearest option: an
answer it cannot read is a wrong answer (docs/architecture.md §4 "Scoring").

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
count (a tag holding a computed value that is no option, ``\\boxed{110^\\circ}``, withdraws nothing). A letter
contradicted by the option value the reply then concludes on ("The answer is (A). … so ∠A is 27°." with 27°
option C's), or by the one the sentence just before it concludes on ("… the minimum number is 2.\nTherefore, the
answer is B." with 2 option C's), is unparseable (``letter_value_conflict``), and so is a final reading by an
option's value after a different letter. A phrase, label-first verdict or copula whose clause denies it ("I don't think the answer is A",
"I doubt that A is correct") is no commitment, and "it is not A" said of the label last committed to takes that
answer back (``retracted``). Only when a reply commits nowhere are fallbacks tried: its first line, sentence or
clause as a whole (``response``: "B", "B. Monocyte", an option's exact text, "No, Magenta is not greater …"),
an option's text stated as what something is (``stated_text``), the first item of an ordered list
(``ordered_list``) and the one option a short reply names (``stated_text:single_mention``). The parse path is
``rule:form`` or ``unparseable:rule:reason``.

Linear in the reply's length: only the last 256 commitments are read (lines are searched from their end), a
marker's value is the rest of its line up to 500 characters, tags and reasoning blocks are paired in one pass
and JSON decoding is bounded, so a reply repeating a marker half a million times costs a fraction of a second.
"""
from __future__ import annotations

import bisect
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from mmbu.benchmark_eval.parser._labels import (Resolution, bare_answer, clean_candidate, option_labels,
                                                resolve_candidate)
from mmbu.benchmark_eval.parser._markers import (COPULAS, DENIALS, FIELD_KEYS, FILLERS, JOINED_VERDICT_TAILS,
                                                 LABEL_FIRST_TAILS, NOT_ANSWER_SUBJECTS, PHRASES, STEMS,
                                                 VERDICT_LEAD_WORDS, VERDICT_STEMS)
from mmbu.benchmark_eval.parser._stated import (concluded_text, first_clause, first_sentence, last_stated_value,
                                                single_mention, stated_text, stated_value, value_stated_just_before)
from mmbu.benchmark_eval.parser._text import (DEFAULT_REASONING, ReasoningMarkers, plain_markup, strip_reasoning,
                                              tag_pairs)

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
# A marker matches only itself; its value is the rest of its line, sliced (at most _VALUE_CAP characters), so a
# later marker on the same line ("Answer: A … Actually, the answer is B") is still found and a line that repeats
# a marker a hundred thousand times costs linear time. "【答案】C", "[Answer] C": a key in brackets needs no colon.
# A key may follow an escaped newline of a JSON string the model wrote unfinished (`…\\n\\nanswer_choice": "A"}`).
_VALUE_CAP = 500
_FIELD = re.compile(r"(?:(?:(?<![A-Za-z])|(?<=\\[nt]))(?:" + _KEYS + r")s?[ \t]*[:=]|[【\[［][ \t]*(?:" + _KEYS + r")s?[ \t]*[】\]］][ \t]*[:=]?)"
                    r"[ \t]*", re.IGNORECASE | re.MULTILINE)
_HEADING = re.compile(_LINE_START + r"(?:" + _KEYS + r")s?[ \t#*:]*$", re.IGNORECASE | re.MULTILINE)
_PHRASE = re.compile(r"(?<![A-Za-z])(?:" + "|".join(PHRASES) + r")[ \t]*[:=]?[ \t]*", re.IGNORECASE)
_LABEL_TOKEN = r"(?:(?i:option|choice|answer|选项|옵션)\s*)?(?:[(\[]([A-Z])[)\]]|(?<![A-Za-z0-9])([A-Z])\)|(?<![A-Za-z0-9'’])([A-Z])(?![A-Za-z0-9'’]))"
# "(B) would be correct only if …", "C would be right if …": a condition, not a verdict
_LABEL_FIRST = re.compile(_LABEL_TOKEN + r"[ \t]*(?i:" + "|".join(LABEL_FIRST_TAILS) + r")"
                          r"(?![ \t,]*(?i:only[ \t]+)?(?i:if|when|unless|provided|had|were)\b)")
# "- **B) brain hemorrhage** — ✅ Correct.": one option marked correct while going through them
_MARKED_CORRECT = re.compile(
    r"^[ \t>*\-•]*" + _LABEL_TOKEN + r"[^\n]*?\s[—–:\-]+\s*(?:✅|✔️?|☑️?)?\s*(?i:correct|right|richtig|korrekt|正确)\b"
    r"(?!\s+(?i:if|only|but))",
    re.MULTILINE,
)
_JOINED_VERDICT = re.compile(  # at most 26 options: a bounded repetition keeps "A, A, A, …" linear
    r"((?:[(\[][A-Z][)\]]|(?<![A-Za-z0-9])[A-Z](?![A-Za-z0-9]))(?:\s*(?:,|、|，|\band\b|\bund\b|和|及)\s*"
    r"(?:[(\[][A-Z][)\]]|(?<![A-Za-z0-9])[A-Z](?![A-Za-z0-9]))){1,25})[ \t]*(?i:" + "|".join(JOINED_VERDICT_TAILS) + r")"
)
_FILLER_ONLY = re.compile(r"^\W*(?:" + FILLERS + r"\W*)*$", re.IGNORECASE)
_SEPARATOR = re.compile(r"^[\s\-–—_*=~#.:|]*$")
# "it's (C)" / "that's C" too: the contraction is what a model that corrects itself writes ("Wait, actually it's B.");
# "is the (B) Small Shrimp": an article before a bracketed label
_COPULA = re.compile(
    r"(?:(?<![A-Za-z])" + COPULAS + r"|(?:(?<=\b[Ii]t)|(?<=\b[Tt]hat))['’]s)[ \t]*[:：]?(?:[ \t]*\n){0,2}[ \t]*"
    r"(?:the[ \t]+(?=[(\[][A-Z][)\]]))?"
    r"(?=((?:(?i:option|choice)\s+)?(?:[(\[][A-Z][)\]]|[A-Z](?:[).:](?=\s|$)|(?=[ \t]*(?:[,;。!]|\.(?!\w)|$))))))",
    re.MULTILINE,
)
# "the most likely diagnosis is retinitis pigmentosa (B).": a few words after the copula, then one bracketed label
# that ends the sentence. Words hold no bracket or comma, so "… is X (A), Y (B) and Z (C)." names no single option.
_COPULA_TRAILING_LABEL = re.compile(
    r"(?:(?<![A-Za-z])" + COPULAS + r"|(?:(?<=\b[Ii]t)|(?<=\b[Tt]hat))['’]s)[ \t]+(?:[^\s()\[\],;:.!?]+[ \t]+){1,12}"
    r"\(([A-Z])\)(?=[ \t]*(?:[.;!](?!\w)|$))",
    re.MULTILINE,
)
# In geometry a bare capital names a point: "the center of the circle is D, …" is no answer.
_POINT_SUBJECT = re.compile(r"\b(?:cent(?:er|re)|midpoint|mid-point|vertex|vertices|point|intersection|foot|origin|"
                            r"endpoint|tangent point)\b[^.!?;\n]*$", re.IGNORECASE)
_NOT_ANSWER_SUBJECT = re.compile(NOT_ANSWER_SUBJECTS, re.IGNORECASE)
_CLAUSE_START = re.compile(r"[.!?;\n。！？；][^.!?;\n。！？；]*$")
_DENIAL = re.compile(DENIALS, re.IGNORECASE)
_TAG_OPEN, _TAG_CLOSE = re.compile(r"<answer>", re.IGNORECASE), re.compile(r"</answer>", re.IGNORECASE)
_ANSWER_TAG_MARKUP = re.compile(r"</?answer>", re.IGNORECASE)
_FIELD_PREFIX = re.compile(r"^\s*(?:" + _KEYS + r")s?\s*[:=]\s*", re.IGNORECASE)
# JSON answer keys as harnesses name them: "answer", "final_answer", "answer_choice", "correct_option", "answerLetter"
_ANSWER_KEY = re.compile(r"^(?:(?:final|correct|chosen|selected|best|predicted|my)[ _-]?)?(?:answer|choice|option)"
                         r"(?:[ _-]?(?:choice|option|letter|label|key))?$", re.IGNORECASE)
_JSON_OBJECT = re.compile(r"\{\s*\"")
_MAX_JSON_OBJECTS = 64     # the last objects of a reply are decoded (its answer object comes last)
_MAX_COMMITMENTS = 256     # the last commitments of a reply are read (a reply repeating a marker is read from its end)
_WINDOW, _OVERLAP = 16384, 256  # search windows from a line's end; markers are far shorter than the overlap
_LIST_ITEM = re.compile(r"^[ \t]*(?:\d+[.)]|[-*•])[ \t]+(.+)$", re.MULTILINE)
_LINE_LABEL = re.compile(r"^[ \t*]*[(\[]?([A-Z])[)\].:][ \t]", re.MULTILINE)
# a line that is a letter alone, either case ("b", "(C)", "**D.**"): two such lines with different letters are two answers
_LONE_LINE = re.compile(r"^[\s*_#>]*[(\[]?([A-Za-z])[)\].:]?[\s*_]*$")
_LONE_LABEL_ITEM = re.compile(r"^[\s*_]*[(\[]?[A-Z][)\].:]?[\s*_]*$")
_NON_SPACE = re.compile(r"\S")
# A tag whose body is a number (with units or math) names no option: it is a computed value, not a withdrawal.
_VALUE_BODY = re.compile(r"^[\s\d.,+\-−/×·*^√π°%()=:<>a-zA-Z]*\d[\s\d.,+\-−/×·*^√π°%()=a-zA-Z]*$")
_WORD = re.compile(r"[A-Za-z]{4,}")
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
    lone_line_labels: frozenset[str] = frozenset()  # letters standing alone on their lines ("b\ne", "A\nB\nC\nD")


class _Lines:
    """Line ends of a text, to slice a value to the end of its line without scanning the rest of the text."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.ends = [m.start() for m in re.finditer("\n", text)] + [len(text)]

    def rest(self, start: int) -> str:
        """From `start` to the end of its line (at most :data:`_VALUE_CAP` characters)."""
        end = self.ends[bisect.bisect_left(self.ends, start)]
        return self.text[start: min(end, start + _VALUE_CAP)]

    def next_line(self, end: int) -> tuple[int, str]:
        """The first non-empty line after `end` (a value written under its marker)."""
        found = _NON_SPACE.search(self.text, end)
        if found is None:
            return len(self.text), ""
        return found.start(), self.rest(found.start())


def _value(lines: _Lines, start: int) -> tuple[int, str]:
    """The words after a marker, or the next line when the marker ends its line ("is:", "ist also:").

    A next line that opens a list of two or more options ("would be:\nA. …\nC. …") names them all: a marker over a
    list of options commits to none of them alone."""
    value = _ANSWER_TAG_MARKUP.sub(" ", lines.rest(start))  # "Answer: (C)</answer>" inside \boxed{}
    if clean_candidate(value) and not _FILLER_ONLY.match(value):
        return start, value
    position, line = lines.next_line(start + len(value))
    return position, _listed(lines, position, line)


def _listed(lines: _Lines, position: int, line: str) -> str:
    """`line` (starting at `position`), or two labels when it opens a list of options ("A. …\nC. …")."""
    first = _LINE_LABEL.match(line)
    if first:
        line_end = lines.text.find("\n", position)
        _, following = lines.next_line(len(lines.text) if line_end == -1 else line_end)
        second = _LINE_LABEL.match(following)
        if second and second.group(1) != first.group(1):
            return f"{first.group(1)} and {second.group(1)}"
    return line


def _at_line_start(text: str, position: int) -> bool:
    line_start = text.rfind("\n", max(0, position - 200), position) + 1
    return re.fullmatch(r"[ \t>#*_\-•\d.)]*", text[max(line_start, position - 200):position]) is not None


def _json_answers(text: str) -> tuple[list[_Commitment], list[tuple[int, int]]]:
    """The answer keys of the JSON objects in `text`, and where those objects are."""
    decoder = json.JSONDecoder()
    found: list[_Commitment] = []
    objects: list[tuple[int, int]] = []
    end = -1
    for start in [m.start() for m in _JSON_OBJECT.finditer(text)][-_MAX_JSON_OBJECTS:]:
        if start < end:
            continue  # inside an object already read
        try:
            value, end = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            objects.append((start, end))
            for key, item in value.items():
                if _ANSWER_KEY.match(str(key).strip()):
                    if isinstance(item, list) and len(item) == 1:
                        item = item[0]
                    candidate = item if isinstance(item, str) else json.dumps(item)
                    found.append(_Commitment(start, "json_answer", candidate[:_VALUE_CAP], withdraws=True))
    return found, objects


def _hot_lines(low: str, starts: list[int], stems: tuple[str, ...]) -> list[tuple[int, int]]:
    """(start, end) of the lines of the lower-cased text `low` (lines starting at `starts`) that contain one of
    `stems` (str.find per stem: far cheaper than a regex)."""
    hot: set[int] = set()
    for stem in stems:
        position = low.find(stem)
        while position != -1:
            line = bisect.bisect_right(starts, position) - 1
            hot.add(line)
            position = low.find(stem, starts[line + 1] if line + 1 < len(starts) else len(low))
    ends = [start - 1 for start in starts[1:]] + [len(low)]
    return [(starts[line], ends[line]) for line in sorted(hot)]


def _in_spans(pattern: re.Pattern[str], text: str, spans: list[tuple[int, int]]) -> list[re.Match[str]]:
    """The last :data:`_MAX_COMMITMENTS` matches of `pattern` that start on the lines in `spans`, in text order.

    Only a reply's last commitments are read, so the lines are searched from the end, a window at a time, and
    the search stops once enough matches are found: a line repeating a marker costs a window, not the line.
    """
    found: dict[int, re.Match[str]] = {}
    for start, end in reversed(spans):
        window_end = end
        while window_end > start and len(found) < _MAX_COMMITMENTS:
            window_start = max(start, window_end - _WINDOW)
            # a match may cross the window's start: search a little before it, keep what starts in the window
            for match in pattern.finditer(text, max(start, window_start - _OVERLAP), window_end):
                if match.start() >= window_start or window_start == start:
                    found.setdefault(match.start(), match)
            window_end = window_start
        if len(found) >= _MAX_COMMITMENTS:
            break
    return [found[position] for position in sorted(found)][-_MAX_COMMITMENTS:]


def _fields(lines: _Lines, spans: list[tuple[int, int]]) -> list[_Commitment]:
    text = lines.text
    found = []
    for match in _in_spans(_FIELD, text, spans):
        position, value = _value(lines, match.end())
        found.append(_Commitment(position, "answer_field", value, withdraws=_at_line_start(text, match.start())))
    for match in _in_spans(_HEADING, text, spans):
        position, value = lines.next_line(match.end())
        found.append(_Commitment(position, "answer_field", value, withdraws=True))
    return found


def _tags(text: str) -> list[_Commitment]:
    found = []
    for _, body_start, body_end, _ in tag_pairs(text, _TAG_OPEN, _TAG_CLOSE)[-_MAX_COMMITMENTS:]:
        body = _FIELD_PREFIX.sub("", text[body_start: min(body_end, body_start + _VALUE_CAP)])  # \boxed{\text{Answer: (J)}}
        # a computed value (\boxed{110^\circ}) that is no option does not take back the answer before it
        value = _VALUE_BODY.match(body) is not None and not _WORD.search(body)
        found.append(_Commitment(body_start, "answer_tag", body, withdraws=not value))
    return found


def _denied(text: str, start: int) -> bool:
    """Whether the clause that leads to `start` denies what follows ("I don't think the answer is A")."""
    before = text[max(0, start - 120): start]
    boundary = _CLAUSE_START.search(before)
    return bool(_DENIAL.search(before[boundary.start() + 1:] if boundary else before))


def _phrases(lines: _Lines, spans: list[tuple[int, int]]) -> list[_Commitment]:
    text = lines.text
    found = []
    for match in _in_spans(_PHRASE, text, spans):
        if _denied(text, match.start()):
            continue
        position, value = _value(lines, match.end())
        found.append(_Commitment(position, "final_phrase", value))
    return found


_WORD_BEFORE = re.compile(r"([^\W\d_][\w'’]*)[ \t]*-?[ \t]*$")


def _in_a_name(text: str, match: re.Match[str]) -> bool:
    """Whether a bare capital letter ends a name rather than opening a verdict: "hepatitis C is the most appropriate
    …", "vitamin B is …", "type-A is …" (the word before it is no connective such as "so" or "answer")."""
    if match.group(3) is None or match.group(0)[:1] != match.group(3):
        return False  # "(C) is correct", "C) … is correct", "option C is correct": a label by its form
    word = _WORD_BEFORE.search(text[max(0, match.start() - 40):match.start()])
    return word is not None and word.group(1).lower() not in VERDICT_LEAD_WORDS


def _labels_first(text: str, spans: list[tuple[int, int]]) -> list[_Commitment]:
    """Verdicts of the form "C is correct": `spans` are the lines holding a verdict word."""
    found = []
    for match in (*_in_spans(_LABEL_FIRST, text, spans), *_in_spans(_MARKED_CORRECT, text, spans)):
        if _denied(text, match.start()) or _in_a_name(text, match):
            continue
        label = next(g for g in match.groups()[:3] if g)
        found.append(_Commitment(match.start(), "label_first", label))
    return found


def _joined_verdicts(text: str, spans: list[tuple[int, int]]) -> list[_Commitment]:
    return [_Commitment(m.start(1), "label_first", m.group(1)) for m in _in_spans(_JOINED_VERDICT, text, spans)]


def _copulas(lines: _Lines) -> list[_Commitment]:
    text = lines.text
    found = []
    for match in _in_spans(_COPULA, text, [(0, len(text))]):
        before = text[max(0, match.start() - 40): match.start()]
        if _NOT_ANSWER_SUBJECT.search(before) or _denied(text, match.start()):
            continue
        label = match.group(1)
        if "(" not in label and "[" not in label and _POINT_SUBJECT.search(text[max(0, match.start() - 80): match.start()]):
            continue  # "the center of the circle is D, …": a point, not an answer
        found.append(_Commitment(match.start(1), "copula", _listed(lines, match.start(1), lines.rest(match.start(1)))))
    # "the most appropriate option would be surgical excision (C).": here "option" is the subject of an answer
    found += [_Commitment(match.start(1), "copula", f"({match.group(1)})")
              for match in _in_spans(_COPULA_TRAILING_LABEL, text, [(0, len(text))]) if not _denied(text, match.start())]
    return found


def _last_line(lines: list[str], other_line_labels: frozenset[str], lone: frozenset[str]) -> list[_Commitment]:
    """A label alone on the last line, after prose (not after a list of options, nor after other lone labels:
    "A\nB\nC\nD" names every option, not D)."""
    if len(lines) < 2 or other_line_labels or len(lone) > 1 or _BULLET.match(lines[-1][1]):
        return []  # "*   **A)" is a list cut off, not an answer
    last = clean_candidate(lines[-1][1])
    if re.fullmatch(r"(?:(?i:option|choice|选项|選項)\s*)?[(\[]?[A-Z][)\]]?[.。]?", last):
        return [_Commitment(lines[-1][0], "last_line", last)]
    return []


# A chat template's end-of-turn token: what a model writes after it (a user turn and an answer it invented, "c<|end|>
# <|user|>問題: … a<|end|>") is no part of its reply.
_END_OF_TURN = re.compile(r"<\|(?:end|im_end|eot_id|eom_id|endoftext|END_RESPONSE)\|>|<end_of_turn>|</s>")


def _first_turn(text: str) -> str:
    end = _END_OF_TURN.search(text)
    return text[: end.start()] if end and text[end.end():].strip() else text


@lru_cache(maxsize=1 << 16)
def _scan(output: str, markers: ReasoningMarkers) -> _Scan:
    """Everything about a reply that does not depend on the options, once per distinct reply."""
    text = plain_markup(_first_turn(strip_reasoning(output, markers)))
    if not text.strip():
        return _Scan(empty=True)
    lines = [(m.start(), m.group()) for m in re.finditer(r"[^\n]+", text) if not _SEPARATOR.match(m.group())]
    other_labels = frozenset(m.group(1) for m in _LINE_LABEL.finditer("\n".join(line for _, line in lines[1:])))
    lone = frozenset(m.group(1).upper() for _, line in lines if (m := _LONE_LINE.match(clean_candidate(line))))
    low = text.lower() if len(text.lower()) == len(text) else text  # a few letters lengthen when lower-cased
    starts = [0] + [m.end() for m in re.finditer("\n", text)]
    hot = _hot_lines(low, starts, STEMS)
    verdict_lines = _hot_lines(low, starts, VERDICT_STEMS)
    indexed = _Lines(text)
    json_found, objects = _json_answers(text)
    # inside a JSON object the decoder has read the answer key: the field pattern would read it again
    fields = [c for c in _fields(indexed, hot) if not any(start < c.position < end for start, end in objects)]
    commitments = (json_found + fields + _tags(text) + _phrases(indexed, hot)
                   + _labels_first(text, verdict_lines) + _joined_verdicts(text, verdict_lines) + _copulas(indexed)
                   + _last_line(lines, other_labels, lone)
                   + [_Commitment(m.start(1), "retraction", m.group(1))
                      for m in _in_spans(_RETRACTION, text, [(0, len(text))])])
    commitments.sort(key=lambda c: (c.position, _EXPLICITNESS[c.rule]))
    commitments = commitments[-_MAX_COMMITMENTS:]
    first = lines[0][1] if lines and not _LIST_ITEM.match(lines[0][1]) else None
    return _Scan(
        empty=False,
        text=text,
        commitments=tuple(commitments),
        first_line=first,
        other_line_labels=other_labels,
        list_items=tuple(m.group(1) for m in _LIST_ITEM.finditer(text)),
        single_line=len(lines) == 1,
        lone_line_labels=lone,
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
    cache: dict[tuple[str, bool], Resolution] = {}  # a reply that repeats itself repeats its candidates
    readings = []
    for c in scan.commitments:
        key = (c.candidate, c.rule in _FIELD_RULES)
        if key not in cache:
            cache[key] = _read(c, options)
        readings.append((c, cache[key]))
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
    conflict = _letter_value_conflict(scan.text, options, readings, commitment, reading)
    return _finish(commitment.rule, Resolution(None, conflict) if conflict else reading)


_BY_LETTER = ("label", "label_with_text", "label_in_words")


def _letter_value_conflict(text: str, options: tuple[str, ...], readings: list[tuple[_Commitment, Resolution]],
                           commitment: _Commitment, reading: Resolution) -> str | None:
    """Why a reply that states a letter and concludes on another option's value has no answer, or None.

    "The answer is (A). … so ∠A is 27°." with 27° option C's value, "The correct option letter is C. The area
    is 3." with 3 option A's, "Answer: B … therefore the answer is 30°." with 30° option A's, "… 10 days ago
    would be 02/19/2016.\nTherefore, the answer is B." with that date option F's: the letter and the value
    disagree, and a careful reader takes neither.
    """
    label = reading.label
    if reading.form == "option_text":
        lettered = {r.label for c, r in readings if c.position < commitment.position and r.form in _BY_LETTER
                    and r.label is not None}
        return "letter_value_conflict" if lettered - {label} else None
    if reading.form not in _BY_LETTER:
        return None
    first = min(c.position for c, r in readings if r.label == label)
    stated = last_stated_value(text, options, first)
    if stated is not None and option_labels(len(options))[stated[1]] != label:
        return "letter_value_conflict"
    before = value_stated_just_before(text, options, first)
    if before is not None and not _same_text(options[before], options[option_labels(len(options)).index(label)]):
        return "letter_value_conflict"
    return None


def _same_text(a: str, b: str) -> bool:
    return a.strip().casefold() == b.strip().casefold()  # options repeated under two letters ("6 kmph")


def _whole_response(scan: _Scan, options: tuple[str, ...]) -> Resolution | None:
    if scan.first_line is None:
        return None  # a list: the list fallback decides
    resolution = resolve_candidate(scan.first_line, options)
    if not resolution.names_something:
        return None
    if resolution.form == "label" and len(scan.lone_line_labels) > 1:
        return Resolution(None, "multiple_labels")  # "b\ne": a letter a line, two answers
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
               ("response", lambda s, o: first_clause(s.text, o)),
               ("stated_text", lambda s, o: stated_text(s.text, o)), ("ordered_list", _ordered_list),
               ("stated_text", lambda s, o: single_mention(s.text, o)),
               ("stated_text", lambda s, o: stated_value(s.text, o)))
    retracted = {c.candidate for c in scan.commitments if c.rule == "retraction"}
    for rule, reader in readers:
        resolution = reader(scan, options)
        if resolution is not None:
            if resolution.label in retracted:  # "A\nIt is not A": the reply takes back what its first line says
                return _finish(rule, Resolution(None, "retracted"))
            if resolution.label is None and rule == "response" and (concluded := _concluded(scan, options)):
                return concluded  # "A) …: not … B) …: not … The most likely mechanism is X.": a review, then its verdict
            if rule == "response" and resolution.label is not None and _judged_other(scan.text, options, resolution.label):
                return _finish(rule, Resolution(None, "letter_value_conflict"))
            return _finish(rule, resolution)
    return _concluded(scan, options) or ClosedParse(None, f"{UNPARSEABLE}:no_answer")


# "副腎皮質ステロイドが適切な治療法として考えられる": an option's text judged the appropriate / correct / most likely one.
_JA_JUDGED = re.compile(r"^(?:が|は)(?:最も)?(?:適切|正しい|正解|妥当|可能性が高い)")


def _judged_other(text: str, options: tuple[str, ...], label: str) -> bool:
    """Whether, after the first line that named `label`, the reply judges another option (by its exact text) the
    right one in Japanese: "c: 抗ウイルス薬\n\n…副腎皮質ステロイドが適切な治療法…" names c and concludes on e."""
    rest = text.split("\n", 1)[1] if "\n" in text else ""
    chosen = option_labels(len(options)).index(label)
    for i, option in enumerate(options):
        option = option.strip().rstrip("。")
        if i == chosen or len(option) < 2:
            continue
        if any(_JA_JUDGED.match(rest[m.end():]) for m in re.finditer(re.escape(option), rest)):
            return True
    return False


def _concluded(scan: _Scan, options: tuple[str, ...]) -> ClosedParse | None:
    """The option's text the reply's last sentence concludes on, when no other reader found an answer."""
    resolution = concluded_text(scan.text, options)
    if resolution is None or resolution.label in {c.candidate for c in scan.commitments if c.rule == "retraction"}:
        return None
    return _finish("concluded_text", resolution)


def _finish(rule: str, resolution: Resolution) -> ClosedParse:
    if resolution.label is None:
        return ClosedParse(None, f"{UNPARSEABLE}:{rule}:{resolution.form}")
    return ClosedParse(resolution.label, f"{rule}:{resolution.form}")
