"""Relevance of a candidate to the taxonomy: which terms of each facet its text names, weighted by facet
(`score_weights` in discovery.yaml). A candidate that names its gap's own leaf gets that weight again.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache

from mmbu.curation.sources.candidate import Candidate
from mmbu.taxonomy.model import Taxonomy, normalise_text

MAX_TERMS_PER_FACET = 2


@lru_cache(maxsize=4096)
def _phrase_pattern(phrase: str) -> re.Pattern[str]:
    return re.compile(r"(?<![a-z0-9])" + re.escape(phrase) + r"(?![a-z0-9])")


def matched_terms(text: str, taxonomy: Taxonomy, facets: list[str]) -> dict[str, list[str]]:
    """facet -> term ids whose name, synonym or abbreviation appears as whole words in `text`."""
    folded = normalise_text(text)
    found: dict[str, list[str]] = {}
    for facet in facets:
        if facet not in taxonomy.facets:
            continue
        for term in taxonomy.terms(facet):
            phrases = {normalise_text(p) for p in (term.name, *term.synonyms, *term.abbreviations)} - {""}
            if any(_phrase_pattern(p).search(folded) for p in phrases):
                found.setdefault(facet, []).append(term.id)
    return found


def score(candidate: Candidate, taxonomy: Taxonomy, weights: Mapping[str, float], gaps: set[str] = frozenset()) -> float:
    """Set `matched_terms` and `score` on the candidate (in place) and return the score."""
    text = " ".join([candidate.title, candidate.description, *candidate.keywords])
    found = matched_terms(text, taxonomy, list(weights))
    value = sum(weights[facet] * min(len(ids), MAX_TERMS_PER_FACET) for facet, ids in found.items())
    leaves = set(found.get("sub_modality", [])) | set(found.get("modality", []))
    if leaves & gaps:
        value += max(weights.values(), default=1.0)
    candidate.matched_terms = found
    candidate.score = round(value, 3)
    return candidate.score
