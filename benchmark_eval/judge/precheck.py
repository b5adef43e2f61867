"""The deterministic pre-check: an open answer that *is* the gold label needs no judge call.

Equivalent when the answer — the whole reply, or the value of its last ``Answer:`` line —
equals the gold answer or one of the row's ``answer_aliases`` after normalisation (NFKC, casefold,
punctuation and whitespace collapsed but a sign closing a word kept, a leading article dropped). The pre-check
only ever says "equivalent"; anything else goes to the LLM judge.
"""
from __future__ import annotations

import re
from collections.abc import Iterable
from typing import NamedTuple

from mmbu.benchmark_eval.parser import DEFAULT_REASONING, ReasoningMarkers, normalise_label_text, strip_reasoning

_ANSWER_LINE = re.compile(r"^[ \t>#*_-]*(?:final[ \t]+answer|answer)[ \t*_]*[:=][ \t]*(.+)$", re.I | re.M)
_ARTICLE = re.compile(r"^(?:a|an|the)\s+")


def _forms(text: str) -> set[str]:
    normalised = normalise_label_text(text)
    return {normalised, _ARTICLE.sub("", normalised)} - {""}


def final_answer_text(output: str | None, reasoning: ReasoningMarkers = DEFAULT_REASONING) -> str:
    """What the judge is shown: the reply without the family's reasoning blocks and without code fences."""
    return strip_reasoning(output or "", reasoning)


class OpenAnswer(NamedTuple):
    """An open classification reply as the judge and the scorer both read it."""

    text: str  # what the judge is shown, and what its verdict is cached under (`final_answer_text`)
    prechecked: bool  # the answer is the gold answer or an alias: equivalent, no judge asked


def read_open_answer(output: str | None, gold: str, aliases: Iterable[str] | None = (),
                     reasoning: ReasoningMarkers = DEFAULT_REASONING) -> OpenAnswer:
    """The reply's shown text and its pre-check, computed once for `mmbu eval judge` and `score` alike."""
    text = final_answer_text(output, reasoning)
    return OpenAnswer(text, _is_gold(text, gold, aliases))


def precheck_equivalent(output: str | None, gold: str, aliases: Iterable[str] | None = (),
                        reasoning: ReasoningMarkers = DEFAULT_REASONING) -> bool:
    """True when the answer is the gold answer (or an alias) up to normalisation."""
    return read_open_answer(output, gold, aliases, reasoning).prechecked


def _is_gold(text: str, gold: str, aliases: Iterable[str] | None) -> bool:
    answers = _forms(text)
    lines = _ANSWER_LINE.findall(text)
    if lines:
        answers |= _forms(lines[-1])
    golds: set[str] = set()
    for value in (gold, *(aliases or ())):
        if value:
            golds |= _forms(str(value))
    return bool(answers & golds)
