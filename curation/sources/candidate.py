"""The one shape every source's hits take: a `Candidate` (a dataset at a real host) or a `Lead`.

Sources only parse; screening, scoring and dedupe fill `license`, `flags`, `excluded`, `score`.
"""
from __future__ import annotations

import re
from html.parser import HTMLParser
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

SourceName = Literal["zenodo", "huggingface", "kaggle", "paperswithcode"]
SOURCES: tuple[str, ...] = ("zenodo", "huggingface", "kaggle", "paperswithcode")


class SourceResponseError(RuntimeError):
    """A source answered with something that is not the JSON it documents (message names source and URL)."""


class SourceRef(BaseModel):
    """Another place the same dataset was found (a duplicate merged into this candidate)."""

    model_config = ConfigDict(extra="forbid")

    source: SourceName
    id: str
    url: str | None = None

    @property
    def ref(self) -> str:
        return f"{self.source}:{self.id}"


class Candidate(BaseModel):
    """A dataset found by discovery. `id` is the source's own id (Zenodo record id, HF repo id, Kaggle ref)."""

    model_config = ConfigDict(extra="forbid")

    source: SourceName
    id: str
    title: str
    url: str
    doi: str | None = None
    homepage: str | None = None
    description: str = ""
    keywords: list[str] = Field(default_factory=list)
    license_raw: list[str] = Field(default_factory=list, description="Licence strings as each field gave them.")
    annotations_creators: list[str] = Field(default_factory=list)
    source_datasets: list[str] = Field(default_factory=list, description="Declared parents (HF source_datasets).")
    related: list[str] = Field(default_factory=list, description="Derived-from / related links and ids.")
    file_names: list[str] = Field(default_factory=list)
    file_sizes: dict[str, int] = Field(
        default_factory=dict, description="Bytes per file name, for the files whose size the host states.")
    resource_type: str | None = Field(
        None, description="The host's resource type, where it has one (Zenodo: dataset, image, image-photo, ...): "
                          "the record's own, else the one its search pass asked for. None in older candidate files.")
    duplicate_licenses: dict[str, list[str]] = Field(
        default_factory=dict, description="Raw licence strings of the duplicates merged into this record, by ref.")
    # filled by screening / scoring / dedupe
    license: str | None = None
    flags: list[str] = Field(default_factory=list)
    reasons: list[str] = Field(default_factory=list, description="One readable sentence per flag.")
    excluded: bool = False
    score: float = 0.0
    matched_terms: dict[str, list[str]] = Field(default_factory=dict)
    llm_relevance: float | None = Field(None, description="0..1 from the optional LLM judge (cached answers).")
    queries: list[str] = Field(default_factory=list)
    also_found_in: list[SourceRef] = Field(default_factory=list)

    @property
    def ref(self) -> str:
        return f"{self.source}:{self.id}"

    def flag(self, name: str, reason: str, *, exclude: bool = False) -> None:
        """Add a screening flag with its reason (idempotent); `exclude` marks the candidate as excluded."""
        if name not in self.flags:
            self.flags.append(name)
            self.reasons.append(f"{name}: {reason}")
        self.excluded = self.excluded or exclude


class Lead(BaseModel):
    """A Papers with Code record: links to where a dataset may live, to be resolved to a real host."""

    model_config = ConfigDict(extra="forbid")

    id: str
    name: str
    full_name: str | None = None
    url: str | None = None
    homepage: str | None = None
    paper_url: str | None = None
    description: str = ""
    modalities: list[str] = Field(default_factory=list)
    tasks: list[str] = Field(default_factory=list)
    links: list[str] = Field(default_factory=list, description="Every URL in the record (homepage, paper, loaders).")
    score: float = 0.0


class _TextExtractor(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []

    def handle_data(self, data: str) -> None:
        self.parts.append(data)


def html_to_text(html: str | None) -> str:
    """Zenodo descriptions are sanitised HTML; screening and scoring want plain text."""
    if not html:
        return ""
    extractor = _TextExtractor()
    extractor.feed(html)
    extractor.close()
    return re.sub(r"\s+", " ", " ".join(extractor.parts)).strip()


def as_str_list(value: object) -> list[str]:
    """Card fields are a string, a list of strings, or missing; always give a list of non-empty strings."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value] if value.strip() else []
    if isinstance(value, (list, tuple)):
        return [str(item) for item in value if item is not None and str(item).strip()]
    return [str(value)]
