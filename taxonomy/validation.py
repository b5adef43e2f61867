"""Structural checks of a loaded taxonomy, all reported at once.

The loader (`model.py`) only checks the schema. Here we check what a schema cannot: that ids and names
are unique, that every `parent` exists in the right facet and no parent chain loops, that a normalised
synonym or abbreviation points to one term only (otherwise raw metadata would resolve by file order),
and that canonical names are written out in full (questions show them; abbreviations are forbidden there).
"""
from __future__ import annotations

from dataclasses import dataclass

from mmbu.taxonomy.model import Facet, Taxonomy, normalise_text


@dataclass(frozen=True)
class Problem:
    """One defect: where it is (facet, term id) and why it is wrong."""

    facet: str
    term: str | None
    cause: str

    def __str__(self) -> str:
        where = f"facet {self.facet!r}" + (f", term {self.term!r}" if self.term else "")
        return f"{where}: {self.cause}"


def validate_taxonomy(taxonomy: Taxonomy) -> list[Problem]:
    """Every structural problem of the taxonomy, in file order (empty when it is valid)."""
    problems: list[Problem] = []
    for name, facet in taxonomy.facets.items():
        problems += _duplicate_ids(name, facet)
        problems += _duplicate_names(name, facet)
        problems += _parent_problems(taxonomy, name, facet)
        problems += _text_clashes(name, facet)
        problems += _abbreviated_names(taxonomy, name, facet)
    return problems


def _duplicate_ids(facet_name: str, facet: Facet) -> list[Problem]:
    seen: set[str] = set()
    problems = []
    for term in facet.terms:
        if term.id in seen:
            problems.append(Problem(facet_name, term.id, "duplicate id (another term of this facet has it)"))
        seen.add(term.id)
    return problems


def _duplicate_names(facet_name: str, facet: Facet) -> list[Problem]:
    first_owner: dict[str, str] = {}
    problems = []
    for term in facet.terms:
        key = normalise_text(term.name)
        if key in first_owner and first_owner[key] != term.id:
            problems.append(
                Problem(facet_name, term.id, f"duplicate name {term.name!r} (also the name of {first_owner[key]!r})")
            )
        first_owner.setdefault(key, term.id)
    return problems


def _parent_problems(taxonomy: Taxonomy, facet_name: str, facet: Facet) -> list[Problem]:
    parent_facet = facet.parent_facet or facet_name
    if parent_facet not in taxonomy.facets:
        return [Problem(facet_name, None, f"parent_facet {parent_facet!r} is not a facet of this taxonomy")]
    parent_ids = {term.id for term in taxonomy.facets[parent_facet].terms}
    problems = []
    for term in facet.terms:
        if term.parent is None:
            if facet.parent_facet and facet.parent_facet != facet_name:
                problems.append(Problem(facet_name, term.id, f"has no parent, but every term here lives under a {parent_facet} term"))
        elif term.parent not in parent_ids:
            problems.append(Problem(facet_name, term.id, f"parent {term.parent!r} is not a term of facet {parent_facet!r}"))
    if parent_facet == facet_name:
        problems += _cycles(facet_name, facet)
    return problems


def _cycles(facet_name: str, facet: Facet) -> list[Problem]:
    """Report each parent cycle once, at the first of its terms in file order."""
    parent_of = {term.id: term.parent for term in facet.terms}
    reported: set[str] = set()
    problems = []
    for term in facet.terms:
        path: list[str] = []
        node: str | None = term.id
        while node is not None and node in parent_of and node not in path:
            path.append(node)
            node = parent_of[node]
        if node is not None and node in path:
            cycle = path[path.index(node):]
            if not reported.intersection(cycle):
                reported.update(cycle)
                chain = " -> ".join([*cycle, node])
                problems.append(Problem(facet_name, cycle[0], f"parent cycle {chain}"))
    return problems


def _text_clashes(facet_name: str, facet: Facet) -> list[Problem]:
    """The same normalised id/name/synonym/abbreviation may not point to two terms of one facet."""
    owner: dict[str, tuple[str, str]] = {}  # normalised text -> (term id, kind of text)
    problems = []
    for term in facet.terms:
        texts = [("synonym", s) for s in term.synonyms] + [("abbreviation", a) for a in term.abbreviations]
        for kind, text in [("id", term.id), ("name", term.name), *texts]:
            key = normalise_text(text)
            if not key:
                problems.append(Problem(facet_name, term.id, f"{kind} {text!r} is empty once normalised"))
                continue
            other, other_kind = owner.setdefault(key, (term.id, kind))
            # Same-term repeats are harmless; id-vs-id and name-vs-name have their own checks.
            if other != term.id and not (kind == other_kind and kind in ("id", "name")):
                problems.append(Problem(facet_name, term.id, f"{kind} {text!r} also resolves to term {other!r} (its {other_kind})"))
    return problems


def _abbreviated_names(taxonomy: Taxonomy, facet_name: str, facet: Facet) -> list[Problem]:
    """Canonical names appear in questions, so they must not contain an abbreviation as a whole word."""
    problems = []
    for term in facet.terms:
        found = taxonomy.abbreviations_in(term.name)
        if found:
            problems.append(Problem(facet_name, term.id, f"name {term.name!r} contains the abbreviation(s) {', '.join(found)}"))
    return problems
