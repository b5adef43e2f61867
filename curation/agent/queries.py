"""Deterministic queries from the taxonomy: leaf phrases (name, synonyms, abbreviations) × specimens × task
words, interleaved across gaps so a query budget is spread over all of them; plus the widening steps.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from itertools import zip_longest

from mmbu.curation.agent.gaps import Gap
from mmbu.taxonomy.model import Taxonomy, Term, normalise_text

# Widening levels: 0 = leaf phrase + specimen + task word; 1 = specimen dropped; 2 = the modality itself.
FULL, NO_SPECIMEN, MODALITY_ONLY = 0, 1, 2


@dataclass(frozen=True)
class Query:
    gap: str
    phrase: str
    modality: str
    specimen: str | None = None
    task: str | None = None
    level: int = FULL

    @property
    def text(self) -> str:
        """The query as recorded on candidates (`queries` field)."""
        return " ".join(part for part in (f'"{self.phrase}"', self.specimen, self.task) if part)


def term_phrases(term: Term, extra: Sequence[str] = ()) -> list[str]:
    """A term's search phrases: name, synonyms, abbreviations, then extra (e.g. LLM-proposed), deduplicated."""
    phrases: list[str] = []
    seen: set[str] = set()
    for phrase in (term.name, *term.synonyms, *term.abbreviations, *extra):
        key = normalise_text(phrase)
        if key and key not in seen:
            seen.add(key)
            phrases.append(phrase)
    return phrases


def specimen_names(taxonomy: Taxonomy, wanted: Sequence[str]) -> list[str]:
    """Names of the configured specimen ids (all specimens when none are configured)."""
    if "specimen" not in taxonomy.facets:
        return []
    terms = taxonomy.terms("specimen")
    if wanted:
        terms = [term for term in terms if term.id in set(wanted)]
    return [term.name for term in terms]


def queries_for_gap(gap: Gap, specimens: Sequence[str], task_words: Sequence[str],
                    extra_synonyms: Mapping[str, Sequence[str]] | None = None) -> list[Query]:
    """Every full query of one gap: phrase-major order, so the canonical name comes first."""
    extra = (extra_synonyms or {}).get(gap.leaf.id, ())
    out = []
    for phrase in term_phrases(gap.leaf, extra):
        for specimen in specimens or [None]:
            for task in task_words or [None]:
                out.append(Query(gap.key, phrase, gap.modality.name, specimen, task))
    return out


def build_queries(taxonomy: Taxonomy, gaps: Sequence[Gap], task_words: Sequence[str], specimens: Sequence[str] = (),
                  extra_synonyms: Mapping[str, Sequence[str]] | None = None) -> list[Query]:
    """All queries, round-robin over the gaps (emptiest gap first)."""
    names = specimen_names(taxonomy, specimens)
    per_gap = [queries_for_gap(gap, names, task_words, extra_synonyms) for gap in gaps]
    return [query for round_ in zip_longest(*per_gap) for query in round_ if query is not None]


def widen(query: Query) -> Query | None:
    """The next broader query: drop the specimen, then search the modality; None when nothing is left to drop."""
    if query.level == FULL and query.specimen:
        return replace(query, specimen=None, level=NO_SPECIMEN)
    if query.level <= NO_SPECIMEN and normalise_text(query.phrase) != normalise_text(query.modality):
        return replace(query, phrase=query.modality, specimen=None, level=MODALITY_ONLY)
    return None
