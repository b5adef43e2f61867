"""Where each fact of a manifest was read, and how far that source can be trusted.

A manifest's `evidence:` block records, for five facts — the host and identifier, the licence, the layout
(folder names, file names, columns), who made the labels, and the sample count — the sources they were read
from and a level per source:

- `primary`: the host's or the authors' own page or files (Zenodo record, dataset card, data paper, the
  authors' repository);
- `secondary`: a third party that read them (a loader such as torch-em, a mirror, a listing such as
  dataset-ninja or Awesome-Medical-Dataset);
- `unverified`: stated without a source that confirms it (then say why in `note`).

A fact's level is the best level among its sources. A source reference is a URL, `owner/repo@commit:path`
(a file of a public GitHub repository at a commit, 7 to 40 hex digits) or `repo:path` (a file of this
repository, e.g. the demo mirror's PROVENANCE.md).

The licence also has a *basis*: the host's own word (a primary citation), two or more independent listings that
agree (secondary citations from different origins: a listing is its publisher, so two files of one organisation's
repositories are one listing), or a single listing. A licence resting on one listing is allowed only when the
manifest says so (`licence_single_listing: true`), so that `mmbu catalogue` can count and name such datasets.
"""
from __future__ import annotations

import re
from typing import Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

Level = Literal["primary", "secondary", "unverified"]
LEVELS: tuple[str, ...] = ("unverified", "secondary", "primary")  # weakest first
FACTS: tuple[str, ...] = ("host", "licence", "layout", "labels", "samples")
# The facts `mmbu manifests validate` requires at `secondary` or better.
REQUIRED_FACTS: tuple[str, ...] = ("host", "licence", "layout")
# Who drew the labels. Text mining and model labels exclude a dataset (licence and label rules).
LabelProvenance = Literal["experts", "annotators", "crowd", "clinical records", "acquisition", "text mining", "model"]
EXCLUDED_PROVENANCE = frozenset({"text mining", "model"})

LicenceBasis = Literal["host", "independent listings", "single listing"]
LICENCE_BASES: tuple[str, ...] = ("host", "independent listings", "single listing")
# Hosts where anyone publishes: the publisher is the first path segment after these prefixes, not the host.
_PUBLISHER_PREFIXES = {"github.com": "", "raw.githubusercontent.com": "", "gitlab.com": "",
                       "huggingface.co": "datasets/", "kaggle.com": "datasets/"}
URL_REF = re.compile(r"^https?://[^\s/]+\.[^\s/]+(/\S*)?$")
REPO_REF = re.compile(r"^(?P<repo>[A-Za-z0-9][\w.-]*/[\w.-]+)@(?P<commit>[0-9a-f]{7,40}):(?P<path>\S.*)$")
LOCAL_REF = re.compile(r"^repo:(?P<path>[\w.][\w./-]*)(#\S+)?$")


def reference_kind(reference: str) -> str | None:
    """'url', 'repo' or 'local' for a well-formed source reference, None otherwise."""
    for kind, pattern in (("url", URL_REF), ("repo", REPO_REF), ("local", LOCAL_REF)):
        if pattern.match(reference):
            return kind
    return None


def citation_origin(reference: str) -> str:
    """Who published a source: a repository's owner, a multi-tenant host's user, otherwise the host name.

    Two citations with one origin are one listing, whatever files of it they name."""
    if match := REPO_REF.match(reference):
        return "github.com/" + match["repo"].split("/")[0].lower()
    if LOCAL_REF.match(reference):
        return "this repository"
    parts = urlsplit(reference)
    host = (parts.hostname or "").lower().removeprefix("www.")
    prefix = _PUBLISHER_PREFIXES.get(host)
    if prefix is None:
        return host
    path = parts.path.lstrip("/")
    owner = path.removeprefix(prefix).split("/")[0] if path.startswith(prefix) else ""
    host = "github.com" if host == "raw.githubusercontent.com" else host
    return f"{host}/{owner.lower()}" if owner else host


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Citation(_Strict):
    """One source a fact was read from."""

    source: str | None = Field(
        None, description="URL, owner/repo@commit:path, or repo:path (a file of this repository). "
                          "May be left out only at level unverified.")
    level: Level
    quote: str | None = Field(None, description="The words read there that state the fact (short).")
    note: str | None = Field(None, description="Anything a reviewer needs to follow the fact (required when unverified and no source).")

    @field_validator("source")
    @classmethod
    def _well_formed(cls, value: str | None) -> str | None:
        if value is not None and reference_kind(value) is None:
            raise ValueError(f"{value!r} is not a source reference: write a URL (https://...), "
                             "owner/repo@commit:path (commit 7-40 hex digits) or repo:path")
        return value

    @model_validator(mode="after")
    def _sourced_unless_unverified(self) -> "Citation":
        if self.source is None and self.level != "unverified":
            raise ValueError(f"a {self.level} citation needs its source (where it was read)")
        if self.source is None and not self.note:
            raise ValueError("an unverified citation without a source needs a note saying why")
        return self


def _as_list(value: object) -> object:
    # One citation may be written as a mapping instead of a one-item list.
    return [value] if isinstance(value, dict) else value


class _Cited(_Strict):
    cites: list[Citation] = Field(min_length=1)

    @field_validator("cites", mode="before")
    @classmethod
    def _one_or_many(cls, value: object) -> object:
        return _as_list(value)


class LabelEvidence(_Cited):
    provenance: LabelProvenance = Field(
        description="Who drew the labels: experts, annotators (people whose expertise the source does not state), "
                    "crowd, clinical records (diagnosis from the patient record), acquisition (a property recorded "
                    "by the device or protocol), text mining, model.")


class SampleEvidence(_Cited):
    count: int | None = Field(None, ge=1,
                              description="Images (or volumes) the source states; left out when no source states it.")


class Evidence(_Strict):
    """Where the manifest's facts were read. Host, licence and layout need a `secondary` source or better."""

    host: list[Citation] = Field(min_length=1, description="Host and identifier (record, repo, slug, URL).")
    licence: list[Citation] = Field(min_length=1)
    layout: list[Citation] = Field(min_length=1, description="Folder names, file names, columns.")
    labels: LabelEvidence
    samples: SampleEvidence
    licence_single_listing: bool = Field(
        False, description="True when the licence rests on one third-party listing: no page of the host states it "
                           "and no second, independent listing was found. Required then, refused otherwise.")

    @field_validator("host", "licence", "layout", mode="before")
    @classmethod
    def _one_or_many(cls, value: object) -> object:
        return _as_list(value)

    def citations(self, fact: str) -> list[Citation]:
        value = getattr(self, fact)
        return value.cites if isinstance(value, _Cited) else value

    def level(self, fact: str) -> str:
        """The best level among the fact's sources."""
        return max((c.level for c in self.citations(fact)), key=LEVELS.index)

    def levels(self) -> dict[str, str]:
        return {fact: self.level(fact) for fact in FACTS}

    def licence_basis(self) -> str:
        """'host' (a primary citation), 'independent listings' (secondary citations from two or more origins) or
        'single listing'."""
        if any(c.level == "primary" for c in self.licence):
            return "host"
        origins = {citation_origin(c.source) for c in self.licence if c.level == "secondary" and c.source}
        return "independent listings" if len(origins) >= 2 else "single listing"

    def weakest_required(self) -> str:
        """The lowest level among host, licence and layout: what the build prints for the dataset."""
        return min((self.level(fact) for fact in REQUIRED_FACTS), key=LEVELS.index)


def evidence_problems(evidence: Evidence | None) -> list[tuple[str, str]]:
    """(field path, reason) for evidence that does not let a reviewer trust the manifest."""
    if evidence is None:
        return [("evidence", "missing: record where the host, licence, layout, label provenance and sample "
                             "count were read (see manifests/README.md, 'Evidence')")]
    problems = []
    for fact in REQUIRED_FACTS:
        if evidence.level(fact) == "unverified":
            problems.append((f"evidence.{fact}", "has only unverified sources; cite a primary or secondary source "
                                                 "(the host's page, the authors' files, a loader or a listing)"))
    if evidence.level("licence") != "unverified":  # no listing at all is reported above
        problems += _licence_basis_problems(evidence)
    if evidence.labels.provenance in EXCLUDED_PROVENANCE:
        problems.append(("evidence.labels.provenance",
                         f"labels made by {evidence.labels.provenance} exclude a dataset; record it in the review "
                         "trail (manifests/reviews/catalogue/) instead"))
    return problems


def _licence_basis_problems(evidence: Evidence) -> list[tuple[str, str]]:
    """A licence on one listing must say so; one on the host or two listings must not."""
    basis = evidence.licence_basis()
    if basis == "single listing" and not evidence.licence_single_listing:
        listing = next((citation_origin(c.source) for c in evidence.licence if c.source), "one source")
        return [("evidence.licence", f"rests on one third-party listing ({listing}); cite the host's own page or a "
                                     "second, independent listing, or say so with `licence_single_listing: true` "
                                     "under evidence")]
    if basis != "single listing" and evidence.licence_single_listing:
        return [("evidence.licence_single_listing",
                 f"is true, but the licence rests on {'the host' if basis == 'host' else basis}; remove it")]
    return []
