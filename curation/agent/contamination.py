"""The contamination exclusion list (`curation/data/contamination.yaml`) and how a candidate matches it:
by source id or DOI, by a name variant in its title/id/tags/declared parents/links, after a derivation
phrase in its description, or through a listed parent plus instruction/VQA wording.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from mmbu.curation.data import CONTAMINATION_PATH, load_yaml_model
from mmbu.curation.sources.candidate import Candidate

DERIVATION = r"(?:derived|built|constructed|sourced|curated|extracted|adapted|based|collected|taken|subset|generated)\s+(?:from|on|of)\b[^.;]{0,80}?"


class ExclusionListError(ValueError):
    """The exclusion list file is not valid (message names the file and field)."""


class DerivedFrom(BaseModel):
    model_config = ConfigDict(extra="forbid")

    names: list[str] = Field(min_length=1)
    only_if_text_has: list[str] = Field(min_length=1)


class ExclusionEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str
    name: str
    reason: str
    names: list[str] = Field(min_length=1)
    refs: list[str] = Field(default_factory=list)
    derived_from: DerivedFrom | None = None


class ExclusionFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: int = 1
    entries: list[ExclusionEntry]


def name_pattern(name: str) -> re.Pattern[str]:
    """Whole-word, separator-tolerant: "VQA-RAD" matches "vqa rad", "VQA_RAD", "vqarad"; "SLAKE" not "slaked"."""
    tokens = re.findall(r"[a-z0-9]+", name.casefold())
    return re.compile(r"(?<![a-z0-9])" + r"[\W_]*".join(map(re.escape, tokens)) + r"(?![a-z0-9])")


@dataclass(frozen=True)
class Match:
    entry: ExclusionEntry
    how: str

    @property
    def sentence(self) -> str:
        return f"{self.how} ({self.entry.name}: {self.entry.reason})"


class ExclusionList:
    def __init__(self, entries: list[ExclusionEntry]):
        self.entries = entries

    @classmethod
    def load(cls, path: Path = CONTAMINATION_PATH) -> ExclusionList:
        return cls(load_yaml_model(path, ExclusionFile, ExclusionListError, "exclusion list").entries)

    @cached_property
    def _patterns(self) -> list[tuple[ExclusionEntry, list[re.Pattern[str]], list[re.Pattern[str]]]]:
        return [
            (entry, [name_pattern(n) for n in (entry.name, *entry.names) if "/" not in n],
             [name_pattern(n) for n in entry.derived_from.names] if entry.derived_from else [])
            for entry in self.entries
        ]

    def match(self, candidate: Candidate) -> list[Match]:
        """Every entry the candidate hits, with a sentence saying how."""
        own_refs = {candidate.ref.casefold(), *(ref.ref.casefold() for ref in candidate.also_found_in)}
        if candidate.doi:
            own_refs.add(f"doi:{candidate.doi.casefold()}")
        named_fields = {
            "title": candidate.title, "id": candidate.id, "keywords": " | ".join(candidate.keywords),
            "source_datasets": " | ".join(candidate.source_datasets), "links": " | ".join(candidate.related),
        }
        description = candidate.description.casefold()
        all_text = " ".join([*named_fields.values(), candidate.description]).casefold()
        matches: list[Match] = []
        for entry, patterns, parents in self._patterns:
            hit = next((f"listed id {ref}" for ref in entry.refs if ref.casefold() in own_refs), None)
            if hit is None:
                hit = next((f"its {field} names {entry.name}" for field, text in named_fields.items()
                            for pattern in patterns if pattern.search(text.casefold())), None)
            if hit is None:
                hit = next((f"its description says it derives from {entry.name}" for pattern in patterns
                            if re.search(DERIVATION + pattern.pattern, description)), None)
            if hit is None and parents and entry.derived_from:
                declared = " | ".join([named_fields["source_datasets"], named_fields["links"]]).casefold()
                derives = any(p.search(declared) or re.search(DERIVATION + p.pattern, description) for p in parents)
                wording = [w for w in entry.derived_from.only_if_text_has if name_pattern(w).search(all_text)]
                if derives and wording:
                    hit = f"it derives from {entry.derived_from.names[0]} and speaks of {wording[0]}"
            if hit:
                matches.append(Match(entry, hit))
        return matches
