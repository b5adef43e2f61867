"""What produced a set of scores: read from each run directory's `run.json` and `judge.json` and the release.

Every scoring output carries it (report.md's provenance block, the columns of scores.csv, `<stem>.provenance.json`
beside scores.json): the release's version and inputs hash, the toolkit versions that ran the model and that scored,
the prompt and judge-prompt versions, the model and the judge as their servers reported them (the `model` field of
the answers and `/v1/models`), the dates, and the command lines with secrets masked.
"""
from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mmbu.core.runs import RunFile
from mmbu.core.secrets import redact_argv
from mmbu.core.version import toolkit_version

# scores.csv gets these per row, from the row's model (a spreadsheet of scores then says where each came from)
CSV_FIELDS = ("release_version", "release_inputs_hash", "run_toolkit_version", "prompt_version",
              "model_reported", "judge_model", "judge_reported", "judge_prompt_version", "run_finished_at",
              "scored_with_toolkit_version", "scored_at")


def _read_json(path: Path) -> dict[str, Any]:
    try:
        payload = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return payload if isinstance(payload, dict) else {}


def _release_info(run: dict[str, Any], release_dir: Path | None) -> dict[str, Any]:
    """The release's build_info: as the run recorded it, else read from the release (a run made before
    run.json recorded it, or a release given with --release)."""
    info = run.get("release_build_info")
    if release_dir is not None:
        on_disk = _read_json(Path(release_dir) / "build_info.json")
        if on_disk:
            return on_disk
    return info if isinstance(info, dict) else {}


def run_provenance(run_dir: str | Path, release_dir: str | Path | None = None) -> dict[str, Any]:
    """One run's provenance (see the module docstring); fields a run.json lacks are None."""
    path = Path(run_dir)
    run = _read_json(path / RunFile.RUN)
    judge = _read_json(path / RunFile.JUDGE)
    release = Path(release_dir) if release_dir else (Path(run["release"]) if run.get("release") else None)
    info = _release_info(run, release)
    invocations = [i for i in run.get("invocations") or [] if isinstance(i, dict)]
    last = invocations[-1] if invocations else {}
    versions = run.get("versions") if isinstance(run.get("versions"), dict) else {}
    return {
        "run": str(path),
        "model": run.get("model"),
        "served_model": run.get("served_model"),
        "model_reported": ", ".join(run.get("served_model_reported") or []) or None,
        "prompt_version": run.get("prompt_version"),
        "release": str(release) if release else None,
        "release_version": info.get("release_version"),
        "release_inputs_hash": info.get("inputs_hash"),
        "run_toolkit_version": run.get("toolkit_version") or versions.get("mmbu"),
        "run_started_at": invocations[0].get("started_at") if invocations else None,
        "run_finished_at": last.get("finished_at"),
        "run_command_line": " ".join(last.get("command_line") or []) or None,
        "judge_model": judge.get("judge_model"),
        "judge_reported": ", ".join(judge.get("judge_model_reported") or []) or None,
        "judge_prompt_version": judge.get("prompt_version"),
        "judged_at": judge.get("judged_at"),
    }


def scoring_provenance(run_dirs: Sequence[str | Path], release_dir: str | Path | None = None,
                       command_line: Sequence[str] | None = None) -> dict[str, Any]:
    """The provenance of a scoring: when, with which toolkit and command, and each run's."""
    argv = list(command_line) if command_line is not None else ["mmbu", *sys.argv[1:]]
    return {
        "scored_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "scored_with_toolkit_version": toolkit_version(),
        "command_line": " ".join(redact_argv(argv)),
        "runs": [run_provenance(run_dir, release_dir) for run_dir in run_dirs],
    }


def csv_columns(provenance: dict[str, Any], model: str) -> dict[str, Any]:
    """The provenance columns of one scores.csv row (`model` as the records name it)."""
    run = next((r for r in provenance["runs"] if r["model"] == model), {})
    values = {**run, "scored_with_toolkit_version": provenance["scored_with_toolkit_version"],
              "scored_at": provenance["scored_at"]}
    return {name: values.get(name) for name in CSV_FIELDS}
