"""Text clean-up shared by the closed-answer parser and the box extractor.

Reasoning models wrap their thinking in ``<think>…</think>``; chat models wrap JSON in Markdown
code fences; some models answer in full-width characters. None of that is the answer itself.
"""
from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

_THINK_BLOCK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_THINK_CLOSE = re.compile(r"</think>", re.IGNORECASE)
_THINK_OPEN = re.compile(r"<think>", re.IGNORECASE)
_FENCE = re.compile(r"```[ \t]*[A-Za-z0-9_+-]*[ \t]*\n?(.*?)```", re.DOTALL)
_PUNCTUATION = re.compile(r"[\s\W_]+", re.UNICODE)


def strip_reasoning(text: str) -> str:
    """Drop ``<think>`` blocks and unwrap code fences (their content is kept: JSON answers live there).

    A lone ``</think>`` (servers that strip the opening tag) keeps only what follows it; a lone
    ``<think>`` that never closes means the model never reached an answer, so everything from it
    on is dropped. Unicode is NFKC-normalised, which maps full-width ``Ｂ`` to ``B``.
    """
    text = unicodedata.normalize("NFKC", text if isinstance(text, str) else "")
    text = _THINK_BLOCK.sub(" ", text)
    closes = list(_THINK_CLOSE.finditer(text))
    if closes:
        text = text[closes[-1].end():]
    opened = _THINK_OPEN.search(text)
    if opened:
        text = text[: opened.start()]
    text = _FENCE.sub(lambda m: "\n" + m.group(1) + "\n", text)
    return text.strip()


@lru_cache(maxsize=1 << 16)  # option texts and gold labels repeat across thousands of records
def normalise_label_text(text: str) -> str:
    """Casefolded NFKC text with punctuation and whitespace runs collapsed to single spaces.

    Two answers are "the same text" when their normalised forms are equal; this is the
    deterministic part of label matching (no stemming, no synonyms).
    """
    text = unicodedata.normalize("NFKC", str(text)).casefold()
    return _PUNCTUATION.sub(" ", text).strip()
