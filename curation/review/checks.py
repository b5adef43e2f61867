"""Round-3 automated checks, as injectable functions `check(context) -> CheckOutcome`.

Curation must not import the build stage (layering), so checks that need fetched files — `fetches`,
`files-open`, and the files side of `labels-complete` — read a check-result file that the build side writes:
JSON lines `{"dataset_id": "...", "check": "fetches", "ok": true, "detail": "..."}` (later lines win).
`licence-clear` and the manifest side of `labels-complete` need only curation code and run here.
"""
from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mmbu.curation.manifest import DatasetManifest
from mmbu.curation.manifest.licences import spdx_problem


@dataclass(frozen=True)
class CheckOutcome:
    ok: bool
    detail: str


@dataclass
class CheckContext:
    ref: str
    candidate: Mapping[str, Any] | None
    draft: DatasetManifest | None
    build_results: Mapping[str, Mapping[str, CheckOutcome]] = field(default_factory=dict)

    def build_result(self, check: str) -> CheckOutcome | None:
        if self.draft is None:
            return None
        return self.build_results.get(self.draft.id, {}).get(check)


Check = Callable[[CheckContext], CheckOutcome]


def load_build_results(path: Path | None) -> tuple[dict[str, dict[str, CheckOutcome]], list[str]]:
    """dataset id -> check -> outcome, from the build side's JSONL; bad lines are reported, not fatal."""
    results: dict[str, dict[str, CheckOutcome]] = {}
    problems: list[str] = []
    if path is None:
        return results, problems
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        return results, [f"{path}: cannot read the check results ({exc.strerror})"]
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            outcome = CheckOutcome(bool(row["ok"]), str(row.get("detail") or ""))
            results.setdefault(str(row["dataset_id"]), {})[str(row["check"])] = outcome
        except (ValueError, KeyError, TypeError):
            problems.append(f"{path}: line {number}: not a check result (dataset_id, check, ok)")
    return results, problems


def from_build(check: str) -> Check:
    """A check answered only by the build side's result file."""

    def run(context: CheckContext) -> CheckOutcome:
        result = context.build_result(check)
        if result is None:
            return CheckOutcome(False, f"no build-side result for {check!r}; run the build checks and pass --checks")
        return result

    return run


def licence_clear(context: CheckContext) -> CheckOutcome:
    """The draft's licence is a current SPDX id and agrees with the licence discovery read at the host."""
    if context.draft is None:
        return CheckOutcome(False, "no draft manifest")
    problem = spdx_problem(context.draft.license)
    if problem:
        return CheckOutcome(False, problem)
    found = (context.candidate or {}).get("license")
    if found and found != context.draft.license:
        return CheckOutcome(False, f"the draft says {context.draft.license} but the host says {found}")
    return CheckOutcome(True, context.draft.license)


def labels_complete(context: CheckContext) -> CheckOutcome:
    """Every label has a display name; when the build side looked at the files, it found no unmapped label."""
    if context.draft is None:
        return CheckOutcome(False, "no draft manifest")
    blank = [raw for raw in context.draft.labels if not context.draft.label_spec(raw).name.strip()]
    if blank:
        return CheckOutcome(False, f"label {blank[0]!r} has no display name")
    from_files = context.build_result("labels-complete")
    if from_files is not None:
        return from_files
    return CheckOutcome(True, f"{len(context.draft.labels)} labels named (the files were not checked)")


DEFAULT_CHECKS: dict[str, Check] = {
    "fetches": from_build("fetches"),
    "files-open": from_build("files-open"),
    "labels-complete": labels_complete,
    "licence-clear": licence_clear,
}
