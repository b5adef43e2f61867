"""Whether a candidate passed a round, from its reviews and the round's rule (see review_rules.yaml)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from mmbu.curation.review.model import Review
from mmbu.curation.review.rules import RoundRule

Status = Literal["accepted", "rejected", "pending"]


@dataclass
class Outcome:
    status: Status
    reason: str
    reviewers: list[str] = field(default_factory=list)


def round_outcome(reviews: list[Review], rule: RoundRule) -> Outcome:
    """Veto first (any reviewer failing a veto criterion rejects), then reviewer count, role, majority."""
    reviewers = sorted(review.reviewer for review in reviews)
    for review in reviews:
        vetoed = review.failed(rule.veto_criteria)
        if vetoed:
            return Outcome("rejected", f"veto: {review.reviewer} marked {vetoed[0]} as fail", reviewers)
    if len(reviews) < rule.min_reviewers:
        return Outcome("pending", f"{len(reviews)} of {rule.min_reviewers} reviewers have decided", reviewers)
    if rule.requires_role:
        with_role = [review for review in reviews if review.role == rule.requires_role]
        if not with_role:
            return Outcome("pending", f"waiting for a reviewer with role {rule.requires_role}", reviewers)
        if not any(review.decision == "accept" for review in with_role):
            return Outcome("rejected", f"no {rule.requires_role} accepted it", reviewers)
    accepts = sum(review.decision == "accept" for review in reviews)
    if accepts > rule.accept_share * len(reviews):
        return Outcome("accepted", f"{accepts} of {len(reviews)} reviewers accepted", reviewers)
    return Outcome("rejected", f"only {accepts} of {len(reviews)} reviewers accepted", reviewers)
