"""Promote datasets that passed round 3 into `manifests/datasets/<id>.yaml`.

The manifest is the expert's draft (layout, metadata, labels, ...) with `curation` filled from the
reviewer files; it must pass the same checks as `mmbu manifests validate` (mmbu.curation.manifest.validate)
before it is written, atomically.
"""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path

from mmbu.core.files import write_text_atomic
from mmbu.core.yaml_io import dump_yaml
from mmbu.curation.manifest import CurationHistory, DatasetManifest
from mmbu.curation.manifest.model import CurationEvent
from mmbu.curation.manifest.validate import check_manifest
from mmbu.curation.review.ledger import Ledger
from mmbu.curation.review.trail import Trail, read_draft
from mmbu.taxonomy.model import Taxonomy


@dataclass
class Promotion:
    ref: str
    path: Path | None
    problem: str | None = None


def curation_history(trail: Trail, ledger: Ledger) -> CurationHistory:
    today = dt.date.today().isoformat()
    nomination = ledger.nominations.get(trail.ref)
    events = []
    if nomination:
        events.append(CurationEvent(round=1, decision="nominated", reviewers=[nomination.nominated_by], note=nomination.note))
    for number, stage in ((2, "round 2"), (3, "round 3")):
        events.append(CurationEvent(round=number, decision="accepted", reviewers=trail.reviewers.get(stage, []),
                                    date=today if number == 3 else None))
    events.append(CurationEvent(round=3, decision="promoted", reviewers=trail.reviewers.get("round 3", []), date=today,
                                note=f"promoted from {trail.ref} by mmbu review promote"))
    reviewers = sorted({name for names in trail.reviewers.values() for name in names})
    return CurationHistory(round=3, reviewers=reviewers, nominated_by=nomination.nominated_by if nomination else None,
                           history=events)


def promote(trail: Trail, ledger: Ledger, taxonomy: Taxonomy, datasets_dir: Path) -> Promotion:
    """Write one manifest if the trail says round 3 is passed; a validation problem is returned, not raised."""
    if trail.stage != "round 3" or trail.status != "accepted":
        return Promotion(trail.ref, None, f"not ready: {trail.stage} {trail.status} ({trail.reason})")
    review = next(r for r in ledger.reviews_for(trail.ref, 3) if r.decision == "accept" and r.draft_manifest
                  and str((r.path.parent / r.draft_manifest).resolve()) == trail.draft)
    draft, _path, problem = read_draft(review)
    if draft is None:
        return Promotion(trail.ref, None, problem)
    manifest = DatasetManifest.model_validate({**draft.model_dump(), "curation": curation_history(trail, ledger)})
    target = datasets_dir / f"{manifest.id}.yaml"
    problems = check_manifest(manifest, target, taxonomy)
    if problems:
        where, reason = problems[0]
        return Promotion(trail.ref, None, f"{trail.draft}: field {where}: {reason} (not promoted)")
    header = f"# Promoted from {trail.ref} by `mmbu review promote`; draft: {Path(trail.draft).name}\n"
    body = dump_yaml(manifest.model_dump(mode="json", exclude_none=True), sort_keys=False)
    write_text_atomic(target, header + body)
    return Promotion(trail.ref, target)
