"""Run directories written with the real record writer, for the scoring, judge and report tests.

Import from a test with ``sys.path.insert(0, str(Path(__file__).parent))``.
"""
from __future__ import annotations

import json
from pathlib import Path

from mmbu.benchmark_eval.records import RecordWriter, RunRecord


def make_record(sample_id: str, task: str, form: str, template: str, output: str | None, model: str, *,
                status: str = "ok", **extra) -> RunRecord:
    return RunRecord(sample_id=sample_id, task=task, form=form, template=template, model=model,
                     prompt_version="test-v1", status=status, output=output if status == "ok" else None,
                     error=None if status == "ok" else "timed out", error_reason=None if status == "ok" else "timeout",
                     latency_s=0.01, request_hash=f"{model}-{sample_id}-{task}-{form}-{template}", **extra)


def write_run(runs_dir: Path, model: str, release: Path, records: list[RunRecord]) -> Path:
    """``runs_dir/<model>/predictions.jsonl`` + ``run.json`` naming the release."""
    run_dir = Path(runs_dir) / model.replace("/", "__")
    run_dir.mkdir(parents=True, exist_ok=True)
    with RecordWriter(run_dir / "predictions.jsonl") as writer:
        writer.write_many(records)
    (run_dir / "run.json").write_text(json.dumps({"model": model, "release": str(release)}), encoding="utf-8")
    return run_dir
