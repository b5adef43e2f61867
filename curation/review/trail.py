"""Where every dataset ever considered stands: screening, round 2, round 3, promoted — and why.

The trail is computed from the ledger each time (reviews are the source of truth), so it never drifts
from the reviewer files; `write_audit` saves it as JSONL for the record.
"""
from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path

import yaml

from mmbu.core.files import write_text_atomic
from mmbu.curation.manifest import DatasetManifest
from mmbu.curation.review.checks import DEFAULT_CHECKS, Check, CheckContext, CheckOutcome
from mmbu.curation.review.consensus import round_outcome
from mmbu.curation.review.ledger import Ledger
from mmbu.curation.review.model import Review
from mmbu.curation.review.rules import ReviewRules
from mmbu.core.yaml_io import read_yaml

STAGES = ("screening", "round 2", "round 3", "promotion")


@dataclass
class Trail:
    ref: str
    title: str
    origin: list[str]
    stage: str  # the stage it reached
    status: str  # excluded | pending | rejected | accepted | promoted
    reason: str
    reviewers: dict[str, list[str]] = field(default_factory=dict)
    checks: dict[str, dict[str, object]] = field(default_factory=dict)
    draft: str | None = None
    manifest: str | None = None
    rejection: str | None = None  # the trail file's rejection reason (a key of rules.rejection_reasons)

    def passed(self, stage: str) -> bool:
        """True when the dataset got past `stage` (used by the funnel)."""
        order = STAGES.index(self.stage)
        wanted = STAGES.index(stage)
        return order > wanted or (order == wanted and self.status in ("accepted", "promoted"))


def read_draft(review: Review) -> tuple[DatasetManifest | None, str | None, str | None]:
    """(manifest, path, problem) for the draft named by a round-3 review; `curation` may be left out of it."""
    if not review.draft_manifest or review.path is None:
        return None, None, "the round-3 review names no draft_manifest"
    path = (review.path.parent / review.draft_manifest).resolve()
    try:
        document = read_yaml(path) or {}
    except (OSError, yaml.YAMLError) as exc:
        return None, str(path), f"{path}: cannot read the draft manifest ({exc})"
    if not isinstance(document, dict):
        return None, str(path), f"{path}: the draft manifest is not a mapping"
    document.setdefault("curation", {"round": 3, "reviewers": [review.reviewer]})
    try:
        return DatasetManifest.model_validate(document), str(path), None
    except ValueError as exc:  # pydantic's ValidationError is a ValueError
        error = exc.errors()[0] if hasattr(exc, "errors") else {"loc": (), "msg": str(exc)}
        where = ".".join(str(p) for p in error["loc"]) or "(top level)"
        return None, str(path), f"{path}: field {where}: {error['msg']}"


def trail_for(ref: str, ledger: Ledger, rules: ReviewRules, checks: Mapping[str, Check],
              build_results: Mapping[str, Mapping[str, CheckOutcome]], datasets_dir: Path) -> Trail:
    record = ledger.candidates.get(ref)
    origin = [name for name, present in (("nominated", ref in ledger.nominations), ("discovered", record is not None))
              if present]
    trail = Trail(ref, ledger.title(ref), origin or ["review only"], "screening", "accepted", "")
    trail_file = ledger.trail_files.get(ref)
    if trail_file is not None:
        trail.origin = [trail_file.origin, *trail.origin]
        if trail_file.manifest and (datasets_dir / f"{trail_file.manifest}.yaml").is_file():
            trail.manifest = str(datasets_dir / f"{trail_file.manifest}.yaml")
        if trail_file.rejection is not None:
            return _rejected(trail, trail_file.rejection, ledger, rules)
    if record is not None and record.get("excluded") and ref not in ledger.nominations:
        trail.status, trail.reason = "excluded", "; ".join(record.get("reasons") or record.get("flags") or ["excluded"])
        return trail
    for number, stage in ((2, "round 2"), (3, "round 3")):
        reviews = ledger.reviews_for(ref, number)
        outcome = round_outcome(reviews, rules.round(number))
        trail.stage, trail.status, trail.reason = stage, outcome.status, outcome.reason
        trail.reviewers[stage] = outcome.reviewers
        if outcome.status != "accepted":
            return trail
    return _round3_requirements(trail, ledger, rules, checks, build_results, datasets_dir, record)


STAGE_OF_ROUND = {1: "screening", 2: "round 2", 3: "round 3"}


def _rejected(trail: Trail, rejection, ledger: Ledger, rules: ReviewRules) -> Trail:
    """A trail file's rejection (reason, quote, source) decides: the trail stops at the reason's round."""
    reason = rules.rejection_reasons[rejection.reason]
    trail.stage = STAGE_OF_ROUND[reason.round]
    trail.status = "excluded" if reason.round == 1 else "rejected"
    trail.rejection = rejection.reason
    trail.reason = f"{rejection.reason}: \u201c{rejection.quote}\u201d ({rejection.source})"
    for number in (2, 3):
        names = sorted(review.reviewer for review in ledger.reviews_for(trail.ref, number))
        if names:
            trail.reviewers[STAGE_OF_ROUND[number]] = names
    return trail


def _round3_requirements(trail: Trail, ledger: Ledger, rules: ReviewRules, checks: Mapping[str, Check],
                         build_results: Mapping[str, Mapping[str, CheckOutcome]], datasets_dir: Path,
                         record: Mapping | None) -> Trail:
    rule = rules.round(3)
    accepting = [r for r in ledger.reviews_for(trail.ref, 3) if r.decision == "accept" and
                 (rule.requires_role is None or r.role == rule.requires_role)]
    draft, draft_path, problem = None, None, None
    for review in accepting:
        draft, draft_path, problem = read_draft(review)
        if draft is not None:
            break
    trail.draft = draft_path
    if rule.requires_draft_manifest and draft is None:
        trail.status, trail.reason = "pending", problem or "no draft manifest"
        return trail
    context = CheckContext(trail.ref, record, draft, build_results)
    failed = []
    for name in rule.requires_checks:
        check = checks.get(name)
        outcome = check(context) if check else CheckOutcome(False, f"no check function named {name!r}")
        trail.checks[name] = {"ok": outcome.ok, "detail": outcome.detail}
        if not outcome.ok:
            failed.append(f"{name}: {outcome.detail}")
    if failed:
        trail.status, trail.reason = "pending", "automated checks not passed: " + "; ".join(failed)
        return trail
    if draft is not None and (datasets_dir / f"{draft.id}.yaml").is_file():
        trail.stage, trail.status, trail.reason = "promotion", "promoted", "in the accepted manifests"
        trail.manifest = str(datasets_dir / f"{draft.id}.yaml")
    else:
        trail.reason = "expert accepted and automated checks passed; ready to promote"
    return trail


def all_trails(ledger: Ledger, rules: ReviewRules, datasets_dir: Path, checks: Mapping[str, Check] | None = None,
               build_results: Mapping[str, Mapping[str, CheckOutcome]] | None = None) -> list[Trail]:
    return [trail_for(ref, ledger, rules, checks or DEFAULT_CHECKS, build_results or {}, datasets_dir)
            for ref in ledger.refs()]


def write_audit(trails: list[Trail], path: Path) -> None:
    write_text_atomic(path, "".join(json.dumps(asdict(t), sort_keys=True, ensure_ascii=False) + "\n" for t in trails))


def funnel(trails: list[Trail], ledger: Ledger) -> list[tuple[str, int]]:
    """The paper's funnel: nominated → candidates → after round 2 → after round 3 (→ promoted)."""
    return [
        ("nominated (round 1)", len(ledger.nominations)),
        ("candidates (nominated + discovered)", len(trails)),
        ("after screening", sum(t.passed("screening") for t in trails)),
        ("after round 2", sum(t.passed("round 2") for t in trails)),
        ("after round 3", sum(t.passed("round 3") for t in trails)),
        ("promoted to manifests/datasets", sum(t.status == "promoted" for t in trails)),
        ("in manifests/datasets (promoted or named by a trail file)", sum(t.manifest is not None for t in trails)),
    ]


def stops(trails: list[Trail]) -> list[tuple[str, str, int]]:
    """Where the trails that are not promoted stopped and why: (stage, reason, count), most frequent first.

    Rejections count by their reason (licence-not-a-licence, credentialed-access, ...); pending trails by what
    they wait for (a second annotator, an expert, the build-side checks).
    """
    counts: dict[tuple[str, str], int] = {}
    for trail in trails:
        if trail.status == "promoted":
            continue
        if trail.rejection:
            why = trail.rejection
        elif trail.status == "pending":
            why = "waiting: " + re.sub(r"\d+ of (\d+) reviewers", r"fewer than \1 reviewers", trail.reason.split(": ")[0])
        else:
            why = f"{trail.status}: {trail.reason}" if trail.status != "accepted" else "accepted, not yet promoted"
        key = (trail.stage, why)
        counts[key] = counts.get(key, 0) + 1
    return sorted(((stage, why, n) for (stage, why), n in counts.items()), key=lambda row: (-row[2], row[0], row[1]))
