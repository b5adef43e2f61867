"""Per-dataset trail files: one YAML per dataset under `manifests/reviews/catalogue/`, so several engineers add
datasets without touching the same file.

    # manifests/reviews/catalogue/bccd.yaml
    ref: nominated:bccd                   # source:id (zenodo:<record>, huggingface:<owner/name>, kaggle:<owner/slug>,
                                          # nominated:<slug> for other hosts)
    title: BCCD blood cell detection
    url: https://github.com/Shenggan/BCCD_Dataset
    nominated_by: catalogue-lead          # round 1
    origin: search                        # mmbu-named (one of the 37 sources the MMBU authors' material names) | search
    manifest: bccd                        # manifests/datasets/bccd.yaml, when accepted (it is the round-3 draft)
    reviews:                              # rounds 2 and 3, one entry per reviewer and round
      - {reviewer: catalogue-lead, role: annotator, round: 2, decision: accept, verdicts: {...}, note: ...}
    rejection:                            # instead of `manifest`, when not accepted
      reason: licence-not-a-licence       # a key of rejection_reasons in curation/data/review_rules.yaml
      quote: "free for academic and research purposes"
      source: https://github.com/DebeshJha/Kvasir-SEG   # URL, owner/repo@commit:path or repo:path

A rejection with its quote and source is decisive: the trail stops at the reason's round whatever the reviews say.
"""
from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from mmbu.curation.manifest.evidence import reference_kind
from mmbu.curation.review.model import REF_PATTERN, Review, ReviewFileError, Verdict, read_yaml
from mmbu.curation.review.rules import ReviewRules

CATALOGUE_DIR = "catalogue"  # under manifests/reviews/


class TrailReview(BaseModel):
    """A reviewer decision inside a trail file (the candidate is the file's `ref`)."""

    model_config = ConfigDict(extra="forbid")

    reviewer: str = Field(min_length=1)
    role: Literal["annotator", "expert"] = "annotator"
    round: Literal[2, 3]
    verdicts: dict[str, Verdict]
    decision: Literal["accept", "reject"]
    note: str | None = None
    date: str | None = None


class Rejection(BaseModel):
    model_config = ConfigDict(extra="forbid")

    reason: str = Field(description="A key of rejection_reasons in curation/data/review_rules.yaml.")
    quote: str = Field(min_length=1, description="The words at the source that decide it.")
    source: str = Field(description="Where the quote was read: URL, owner/repo@commit:path or repo:path.")
    note: str | None = None

    @field_validator("source")
    @classmethod
    def _well_formed(cls, value: str) -> str:
        if reference_kind(value) is None:
            raise ValueError(f"{value!r} is not a source reference (URL, owner/repo@commit:path or repo:path)")
        return value


class TrailFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    ref: str = Field(pattern=REF_PATTERN)
    title: str = Field(min_length=1)
    url: str | None = None
    nominated_by: str = Field(min_length=1)
    origin: Literal["mmbu-named", "search"] = "search"
    date: str | None = None
    note: str | None = None
    manifest: str | None = Field(None, pattern=r"^[a-z0-9][a-z0-9_-]*$",
                                 description="Id of the manifest in manifests/datasets when accepted.")
    reviews: list[TrailReview] = Field(default_factory=list)
    rejection: Rejection | None = None
    path: Path | None = Field(None, exclude=True)

    @model_validator(mode="after")
    def _accepted_or_rejected(self) -> "TrailFile":
        if self.manifest and self.rejection:
            raise ValueError("a trail names a manifest (accepted) and a rejection at once; keep one")
        return self

    def as_reviews(self) -> list[Review]:
        """The entries as ordinary reviewer decisions; a round-3 accept points at the manifest as its draft."""
        reviews = []
        for entry in self.reviews:
            draft = f"../../datasets/{self.manifest}.yaml" if entry.round == 3 and self.manifest else None
            review = Review(candidate=self.ref, draft_manifest=draft, **entry.model_dump())
            review.path = self.path
            reviews.append(review)
        return reviews


def load_trail_file(path: Path, rules: ReviewRules) -> TrailFile:
    """Parse one trail file; verdict names and the rejection reason must be the rules' own."""
    try:
        trail = TrailFile.model_validate(read_yaml(path))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "(top level)"
        raise ReviewFileError(f"{path}: field {where}: {first['msg']}") from None
    trail.path = path
    expected = trail.manifest or None
    if expected and path.stem != expected:
        raise ReviewFileError(f"{path}: field manifest: {expected!r} must equal the file name stem {path.stem!r} "
                              "(one trail file per dataset)")
    for index, review in enumerate(trail.reviews):
        unknown = sorted(set(review.verdicts) - set(rules.criteria))
        missing = [name for name in rules.criteria if name not in review.verdicts]
        if unknown:
            raise ReviewFileError(f"{path}: field reviews.{index}.verdicts.{unknown[0]}: unknown criterion "
                                  f"(known: {', '.join(rules.criteria)})")
        if missing:
            raise ReviewFileError(f"{path}: field reviews.{index}.verdicts.{missing[0]}: no verdict given "
                                  "(pass, fail or unsure)")
    if trail.rejection and trail.rejection.reason not in rules.rejection_reasons:
        raise ReviewFileError(f"{path}: field rejection.reason: {trail.rejection.reason!r} is not one of "
                              f"{', '.join(rules.rejection_reasons)}")
    return trail


def load_trail_files(reviews_dir: Path, rules: ReviewRules) -> tuple[list[TrailFile], list[str]]:
    """Every trail file under reviews_dir/catalogue/, and one problem sentence per bad file (the rest load)."""
    folder = reviews_dir / CATALOGUE_DIR
    trails, problems, refs = [], [], {}
    for path in sorted(folder.glob("*.y*ml")) if folder.is_dir() else []:
        try:
            trail = load_trail_file(path, rules)
        except ReviewFileError as exc:
            problems.append(str(exc))
            continue
        if trail.ref in refs:
            problems.append(f"{path}: field ref: {trail.ref} already has the trail file {refs[trail.ref]}; "
                            "one file per dataset")
            continue
        refs[trail.ref] = path
        trails.append(trail)
    return trails, problems
