"""The round rules and review criteria, read from `curation/data/review_rules.yaml` (data, not branches)."""
from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from mmbu.curation.data import REVIEW_RULES_PATH, load_yaml_model


class RulesError(ValueError):
    """The rules file is invalid (message names the file and field)."""


class RoundRule(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    description: str
    min_reviewers: int = Field(0, ge=0)
    accept_share: float = Field(0.5, ge=0, lt=1, description="Accepts must be strictly more than this share.")
    veto_criteria: list[str] = Field(default_factory=list)
    requires_role: str | None = None
    requires_checks: list[str] = Field(default_factory=list)
    requires_draft_manifest: bool = False


class RejectionReason(BaseModel):
    """Why a dataset was not accepted (a trail file's `rejection.reason`), and what it means for the funnel."""

    model_config = ConfigDict(extra="forbid")

    criterion: str | None = Field(description="The criterion this reason fails; null when none can be checked.")
    round: int = Field(2, ge=1, le=3, description="Where the trail stops: 1 = screening (not resolved to a dataset).")
    description: str


class ReviewRules(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: int = 1
    criteria: dict[str, str]
    rejection_reasons: dict[str, RejectionReason] = Field(default_factory=dict)
    rounds: dict[int, RoundRule]

    def round(self, number: int) -> RoundRule:
        return self.rounds[number]


def load_rules(path: Path = REVIEW_RULES_PATH) -> ReviewRules:
    rules = load_yaml_model(path, ReviewRules, RulesError, "review rules")
    for number, rule in rules.rounds.items():
        unknown = sorted(set(rule.veto_criteria) - set(rules.criteria))
        if unknown:
            raise RulesError(f"{path}: field rounds.{number}.veto_criteria: unknown criterion {unknown[0]!r}")
    for name, reason in rules.rejection_reasons.items():
        if reason.criterion is not None and reason.criterion not in rules.criteria:
            raise RulesError(f"{path}: field rejection_reasons.{name}.criterion: unknown criterion {reason.criterion!r}")
    if not {2, 3} <= set(rules.rounds):
        raise RulesError(f"{path}: field rounds: rounds 2 and 3 must be defined")
    return rules
