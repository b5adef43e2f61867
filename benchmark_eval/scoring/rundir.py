"""Open a run directory (``RUNS_DIR/<model>/``) and the release it was run on.

The run records (``predictions.jsonl``) are the single source that judge, score and report
read; ``run.json`` names the release the run was made on, and ``--release`` overrides it (for
a release that moved). Reading the release needs no image bytes.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from ..records import RecordsError, RunRecord, read_records
from ..release import ReleaseError, list_tasks, load_samples

PREDICTIONS_FILE = "predictions.jsonl"
RUN_FILE = "run.json"
JUDGE_FILE = "judge.json"
RECORD_COLUMNS = ("sample_id", "task", "form", "template", "model", "prompt_version", "status", "output",
                  "error_reason", "image_size", "sent_size", "content_size", "box_format")


class RunInputError(Exception):
    """A run directory or its release cannot be used; the message names the path and the cause."""


@dataclass
class RunDir:
    path: Path
    model: str
    release_dir: Path
    records: pd.DataFrame  # one row per (sample, task, form, template): the newest record
    warnings: list[str] = field(default_factory=list)

    @property
    def judge_file(self) -> Path:
        return self.path / JUDGE_FILE


def _release_from_run_json(run_dir: Path) -> Path | None:
    run_file = run_dir / RUN_FILE
    if not run_file.exists():
        return None
    try:
        meta = json.loads(run_file.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise RunInputError(f"{run_file}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
    value = meta.get("release") or meta.get("release_dir") if isinstance(meta, dict) else None
    if isinstance(value, dict):
        value = value.get("path") or value.get("dir")
    if not value:
        return None
    path = Path(value)
    return path if path.is_absolute() else (run_dir / path)


def records_frame(records: list[RunRecord]) -> pd.DataFrame:
    """The newest record per (sample, task, form, template) as a DataFrame of :data:`RECORD_COLUMNS`."""
    rows = [{name: getattr(r, name, None) for name in RECORD_COLUMNS} for r in records]
    frame = pd.DataFrame(rows, columns=list(RECORD_COLUMNS))
    # records are in write order; a re-run (or a new prompt version) appends newer ones
    return frame.drop_duplicates(["sample_id", "task", "form", "template"], keep="last").reset_index(drop=True)


def open_run(run_dir: str | Path, release_override: str | Path | None = None) -> RunDir:
    """Read a run directory's records and find its release; raises :class:`RunInputError`."""
    path = Path(run_dir)
    predictions = path / PREDICTIONS_FILE
    if not predictions.is_file():
        raise RunInputError(f"{path}: no {PREDICTIONS_FILE} (not a run directory made by `mmbu eval run`)")
    warnings: list[str] = []
    try:
        records = read_records(predictions, on_truncated=warnings.append)
    except RecordsError as exc:
        raise RunInputError(str(exc)) from None
    if not records:
        raise RunInputError(f"{predictions}: no run records")
    release = Path(release_override) if release_override else _release_from_run_json(path)
    if release is None:
        raise RunInputError(f"{path}: {RUN_FILE} does not name the release; pass --release DIR")
    if not release.is_dir():
        raise RunInputError(f"{release}: release directory does not exist (from {'--release' if release_override else path / RUN_FILE})")
    frame = records_frame(records)
    models = sorted(frame["model"].unique())
    if len(models) > 1:
        raise RunInputError(f"{predictions}: records of several models ({', '.join(models)}); one run directory holds one model")
    versions = frame.groupby(["task", "form"])["prompt_version"].nunique()
    for (task, form), count in versions[versions > 1].items():
        warnings.append(f"{predictions}: {task}/{form} mixes {count} prompt versions; the newest record per sample is scored")
    return RunDir(path, models[0], release, frame, warnings)


def load_gold(release_dir: str | Path, tasks: list[str] | None = None) -> dict[str, pd.DataFrame]:
    """Per task: the release rows (no images), indexed by ``sample_id``."""
    try:
        present = list_tasks(release_dir)
        wanted = [t for t in (tasks or present) if t in present]
        missing = sorted(set(tasks or ()) - set(present))
        if missing:
            raise RunInputError(f"{release_dir}: the release has no task {', '.join(missing)} (it has {', '.join(present)})")
        return {task: load_samples(release_dir, task).set_index("sample_id", drop=False) for task in wanted}
    except ReleaseError as exc:
        raise RunInputError(str(exc)) from None
