"""Reviewer files (one YAML per reviewer decision) and the round-1 nominations file.

    # manifests/reviews/round2/zenodo-11012345/alice.yaml
    reviewer: alice
    role: annotator            # or expert
    round: 2
    candidate: zenodo:11012345 # source:id, as in the discover output (or a nomination's ref)
    verdicts: {public-with-clear-licence: pass, clear-images: pass, human-made-labels: pass,
               not-contaminated: pass, in-scope: pass}
    decision: accept           # or reject
    note: masks drawn by two radiologists
    draft_manifest: chest.yaml # round 3: the manifest to promote, relative to this file
"""
from __future__ import annotations

from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from mmbu.core.yaml_io import describe_yaml_error, read_yaml as read_yaml_file

Verdict = Literal["pass", "fail", "unsure"]
NOMINATIONS_FILE = "nominations.yaml"
REF_PATTERN = r"^(zenodo|huggingface|kaggle|paperswithcode|nominated):\S+$"


class ReviewFileError(ValueError):
    """A reviewer or nominations file is invalid; the message names the file and the field."""


class Review(BaseModel):
    model_config = ConfigDict(extra="forbid")

    reviewer: str = Field(min_length=1)
    role: Literal["annotator", "expert"] = "annotator"
    round: Literal[2, 3]
    candidate: str = Field(pattern=REF_PATTERN)
    verdicts: dict[str, Verdict]
    decision: Literal["accept", "reject"]
    note: str | None = None
    date: str | None = None
    draft_manifest: str | None = None
    path: Path | None = Field(None, exclude=True)

    @property
    def key(self) -> tuple[str, int, str]:
        return (self.candidate, self.round, self.reviewer)

    def failed(self, criteria: list[str]) -> list[str]:
        return [name for name in criteria if self.verdicts.get(name) == "fail"]

    def same_decision(self, other: Review) -> bool:
        return self.model_dump(exclude={"path", "note", "date"}) == other.model_dump(exclude={"path", "note", "date"})


class Nomination(BaseModel):
    model_config = ConfigDict(extra="forbid")

    ref: str = Field(pattern=REF_PATTERN,
                     description="source:id of the dataset, or nominated:<slug> for one at no searched host.")
    title: str
    url: str
    nominated_by: str
    note: str | None = None


class NominationsFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    nominations: list[Nomination] = Field(default_factory=list)


def _first_error(path: Path, exc: ValidationError) -> ReviewFileError:
    first = exc.errors()[0]
    where = ".".join(str(part) for part in first["loc"]) or "(top level)"
    return ReviewFileError(f"{path}: field {where}: {first['msg']}")


def read_yaml(path: Path) -> object:
    """A reviewer file's YAML, or ReviewFileError naming the file and the cause in one line."""
    try:
        return read_yaml_file(path)
    except OSError as exc:
        raise ReviewFileError(f"{path}: cannot read the file ({exc.strerror})") from None
    except yaml.YAMLError as exc:
        raise ReviewFileError(f"{path}: not valid YAML: {describe_yaml_error(exc)}") from None


def load_review(path: Path, criteria: dict[str, str]) -> Review:
    """Parse one reviewer file; every verdict must name a known criterion and every criterion needs a verdict."""
    try:
        review = Review.model_validate(read_yaml(path))
    except ValidationError as exc:
        raise _first_error(path, exc) from None
    unknown = sorted(set(review.verdicts) - set(criteria))
    if unknown:
        raise ReviewFileError(f"{path}: field verdicts.{unknown[0]}: unknown criterion (known: {', '.join(criteria)})")
    missing = [name for name in criteria if name not in review.verdicts]
    if missing:
        raise ReviewFileError(f"{path}: field verdicts.{missing[0]}: no verdict given (pass, fail or unsure)")
    review.path = path
    return review


def load_nominations(path: Path) -> list[Nomination]:
    try:
        return NominationsFile.model_validate(read_yaml(path) or {}).nominations
    except ValidationError as exc:
        raise _first_error(path, exc) from None
