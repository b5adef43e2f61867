"""Answers given by an option's text alone, in a sentence ("The cell type pictured is a monocyte.").

Read only when the reply names no option anywhere else: exactly one option's text occurs in the
whole reply, and it occurs as what something *is* ("… is a monocyte.", "… ist 114.64 mm.",
"… is "Chanel No. 5 perfume"."), or as the reply's first sentence ("True. The painting is …").
A reply that names two options' texts, negates ("is not a monocyte") or qualifies the text
("monocyte-like") is not read. Texts shorter than three characters are never searched for.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache

from ._labels import Resolution, option_by_text, option_labels

_MIN_TEXT = 3
_COPULA = r"(?<![A-Za-z])(?:is|was|are|be|ist|sind|est|es|是|为|為)\s+(?:(?:a|an|the|indeed|likely|probably)\s+)*"
_OPEN_QUOTE = r"[\"'“‘«]?"
_END = r"[\"'”’»]?(?=\s*(?:[.,;:!?)。，；]|$|(?:which|that|because|since|with|as|and it)\b))"
_FIRST_SENTENCE = re.compile(r"^\s*([^.!?。\n]{1,80}?)[.!?。](?:\s|$)")


@lru_cache(maxsize=1 << 14)  # option texts repeat across samples in any order
def _text_pattern(text: str) -> re.Pattern[str] | None:
    """An option's text as a pattern (words joined by any punctuation or none), or None if too short."""
    words = re.findall(r"\d+|[^\W\d_]+", text)  # "114.64mm" → 114, 64, mm: matches "114.64 mm" too
    if len("".join(words)) < _MIN_TEXT:
        return None
    return re.compile(r"(?<!\w)" + r"[\W_]*".join(re.escape(w) for w in words) + r"(?!\w)", re.IGNORECASE)


@lru_cache(maxsize=1 << 14)
def _stated_pattern(text: str) -> re.Pattern[str]:
    """The option's text as what something is: "… is a monocyte.", "… ist 114.64 mm."."""
    body = _text_pattern(text).pattern.removeprefix(r"(?<!\w)").removesuffix(r"(?!\w)")
    return re.compile(_COPULA + _OPEN_QUOTE + body + _END, re.IGNORECASE)


def stated_text(text: str, options: Sequence[str]) -> Resolution | None:
    """The option whose text the reply states as its answer (see the module docstring), or None."""
    named = [i for i, option in enumerate(options) if (p := _text_pattern(option)) is not None and p.search(text)]
    if len(named) != 1:
        return None
    if _stated_pattern(options[named[0]]).search(text):
        return Resolution(option_labels(len(options))[named[0]], "stated_text")
    return None


def first_sentence(text: str, options: Sequence[str]) -> Resolution | None:
    """The reply's first sentence when it is exactly one option's text ("True. The name of …")."""
    match = _FIRST_SENTENCE.match(text)
    # "No. 11: [Image 17] …" numbers a question; it does not answer "no"
    if not match or len(re.sub(r"\W", "", match.group(1))) < _MIN_TEXT or text[match.end():match.end() + 1].isdigit():
        return None
    label = option_by_text(match.group(1), options)
    return Resolution(label, "first_sentence") if label is not None else None
