"""Load `taxonomy.yaml` into typed terms and answer the questions other stages ask of it.

The taxonomy is data: facets (modality, sub_modality, domain, specimen, anatomy, stain, ...)
each holding terms with a canonical name, synonyms and abbreviations. Code here is generic;
adding a term is a YAML edit.
"""
from __future__ import annotations

import difflib
import hashlib
import re
import unicodedata
from functools import cached_property
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from mmbu.core.yaml_io import describe_yaml_error, parse_yaml

DEFAULT_TAXONOMY_PATH = Path(__file__).with_name("taxonomy.yaml")


class TaxonomyError(ValueError):
    """The taxonomy file cannot be read or does not match the schema (message names file and field)."""


class Term(BaseModel):
    """One canonical term. `id` is a stable slug; `name` is what questions and metadata show."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9_]*$")
    name: str
    parent: str | None = None
    synonyms: tuple[str, ...] = ()
    abbreviations: tuple[str, ...] = ()
    description: str | None = None


class Facet(BaseModel):
    """A vocabulary axis. `parent_facet` says where a term's `parent` lives (same facet if None)."""

    model_config = ConfigDict(extra="forbid")

    description: str
    parent_facet: str | None = None
    terms: list[Term]


class TaxonomyFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: int = 1
    facets: dict[str, Facet]


def normalise_text(text: str) -> str:
    """Fold case, accents, punctuation and spacing so raw metadata matches canonical terms."""
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    text = re.sub(r"[^a-z0-9+&]+", " ", text.casefold())
    return " ".join(text.split())


class Taxonomy:
    """The loaded taxonomy. Build with `load_taxonomy()`; structural checks live in `validation.py`."""

    def __init__(self, data: TaxonomyFile, source: Path | None = None, raw_bytes: bytes = b"") -> None:
        self.data = data
        self.source = source
        self.content_hash = hashlib.sha256(raw_bytes).hexdigest()

    @property
    def facets(self) -> dict[str, Facet]:
        return self.data.facets

    def terms(self, facet: str) -> list[Term]:
        return self._facet(facet).terms

    def get(self, facet: str, term_id: str) -> Term | None:
        return self._by_id.get(facet, {}).get(term_id)

    def names(self, facet: str) -> list[str]:
        """Canonical names of a facet, in file order (the closed vocabulary for that field)."""
        return [term.name for term in self.terms(facet)]

    def resolve(self, facet: str, raw: str | None) -> Term | None:
        """Map a raw value (id, name, synonym or abbreviation, any case/punctuation) to its term."""
        if raw is None:
            return None
        return self._lookup.get(facet, {}).get(normalise_text(str(raw)))

    def children(self, facet: str, term_id: str) -> list[Term]:
        """Terms (of this facet or of facets whose parent_facet is it) whose parent is `term_id`."""
        return [
            term
            for name, f in self.facets.items()
            if name == facet or f.parent_facet == facet
            for term in f.terms
            if term.parent == term_id and not (name == facet and f.parent_facet not in (None, facet))
        ]

    def ancestors(self, facet: str, term_id: str) -> list[Term]:
        """Parents of a term, nearest first, following `parent` inside the facet and then into
        `parent_facet` (e.g. a sub-modality's modality). Stops at a cycle instead of looping."""
        chain: list[Term] = []
        seen: set[tuple[str, str]] = set()
        term = self.get(facet, term_id)
        while term is not None and term.parent and (facet, term.id) not in seen:
            seen.add((facet, term.id))
            facet = self.facets[facet].parent_facet or facet
            term = self.get(facet, term.parent)
            if term is not None:
                chain.append(term)
        return chain

    def closest(self, facet: str, raw: str, cutoff: float = 0.6) -> Term | None:
        """The term whose name, synonym or abbreviation is spelled most like `raw` (for "did you mean")."""
        table = self._lookup.get(facet, {})
        match = difflib.get_close_matches(normalise_text(raw), list(table), n=1, cutoff=cutoff)
        return table[match[0]] if match else None

    def abbreviations(self) -> set[str]:
        """Every abbreviation in the taxonomy (questions must not use them)."""
        return {abbr for f in self.facets.values() for term in f.terms for abbr in term.abbreviations}

    def abbreviations_in(self, text: str) -> list[str]:
        """Taxonomy abbreviations found in `text` as whole words, sorted.

        Case-sensitive on purpose: "US" (ultrasound) and "IF" (immunofluorescence) are abbreviations,
        "us" and "if" are English words.
        """
        return sorted({match.group(0) for match in self._abbreviation_pattern.finditer(text)})

    @cached_property
    def _abbreviation_pattern(self) -> re.Pattern[str]:
        # Longest first so "SBF-SEM" wins over "SEM"; never matches inside a word.
        alternatives = "|".join(re.escape(a) for a in sorted(self.abbreviations(), key=len, reverse=True))
        return re.compile(rf"(?<!\w)(?:{alternatives})(?!\w)" if alternatives else r"(?!x)x")

    def _facet(self, facet: str) -> Facet:
        try:
            return self.facets[facet]
        except KeyError:
            raise TaxonomyError(f"the taxonomy has no facet {facet!r} (facets: {', '.join(self.facets)})") from None

    @cached_property
    def _by_id(self) -> dict[str, dict[str, Term]]:
        return {name: {t.id: t for t in f.terms} for name, f in self.facets.items()}

    @cached_property
    def _lookup(self) -> dict[str, dict[str, Term]]:
        # First writer wins; clashes are reported by validation, not silently resolved here.
        table: dict[str, dict[str, Term]] = {}
        for name, f in self.facets.items():
            keys = table.setdefault(name, {})
            for term in f.terms:
                for text in (term.id, term.name, *term.synonyms, *term.abbreviations):
                    keys.setdefault(normalise_text(text), term)
        return table


def load_taxonomy(path: str | Path | None = None) -> Taxonomy:
    """Read and schema-check a taxonomy YAML (the bundled one by default). Raises TaxonomyError."""
    source = Path(path) if path else DEFAULT_TAXONOMY_PATH
    try:
        raw = source.read_bytes()
    except OSError as exc:
        raise TaxonomyError(f"{source}: cannot read the taxonomy ({exc.strerror or exc})") from None
    try:
        document = parse_yaml(raw, str(source))
    except yaml.YAMLError as exc:
        raise TaxonomyError(f"{source}: not valid YAML: {describe_yaml_error(exc)}") from None
    try:
        data = TaxonomyFile.model_validate(document)
    except ValidationError as exc:
        raise TaxonomyError(describe_schema_errors(source, exc)) from None
    return Taxonomy(data, source, raw)


def describe_schema_errors(source: Path, exc: ValidationError) -> str:
    """Every schema error, one line each, naming the file and the field path (facets.stain.terms.3.id)."""
    lines = [f"{source}: field {'.'.join(str(p) for p in err['loc']) or '(top level)'}: {err['msg']}" for err in exc.errors()]
    return "\n".join(lines)
