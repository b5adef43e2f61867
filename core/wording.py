"""How two wordings of a label are compared: the same thing, or one a kind of the other.

Shared by the manifest checks (curation) and the question builder (build): an option list must never hold two
answers that are both right, and an accepted alias must stand for its own label only.
"""
from __future__ import annotations

import re

# words in front of a label that make the whole something other than a kind of it ("non-bilobed promyelocyte",
# "tissue outside the cancer area")
NOT_A_KIND = frozenset({"no", "non", "not", "without", "outside", "inside", "in", "of", "with", "around", "the"})


def same_wording(text: str) -> str:
    """The form two wordings are compared in: casefolded words, punctuation and spacing aside, but a + or - closing a
    word kept ("G+" is not "G-"), as the open-answer pre-check compares them."""
    return " ".join(re.findall(r"[^\W_]+(?:[+-](?![^\W_]))?", text.casefold()))


def kind_of(a: str, b: str) -> bool:
    """Whether two wordings name the same thing, or one is the other with a qualifier in front ("cell nucleus" and
    "nucleus", "bilobed promyelocyte" and "promyelocyte"): then both can be right of one region."""
    a, b = same_wording(a), same_wording(b)
    if a == b:
        return True
    narrow, broad = (a, b) if len(a) > len(b) else (b, a)
    return narrow.endswith(f" {broad}") and not NOT_A_KIND & set(narrow[:-len(broad)].split())


def names(text: str, word: str) -> bool:
    """Whether `text` says `word` as a whole word or as its plural ("vessels" names "vessel"), case aside: what the
    question lint calls an option the question gives away, and so what a curated distractor must avoid."""
    return re.search(rf"(?<!\w){re.escape(word)}(?:s|es)?(?!\w)", text, flags=re.IGNORECASE) is not None
