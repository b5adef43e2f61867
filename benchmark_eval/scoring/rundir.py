"""Open a run directory (``RUNS_DIR/<model>/``) and the release it was run on.

The run records (``predictions.jsonl``) are the single source that judge, score and report
read; ``run.json`` names the release the run was made on, and ``--release`` overrides it (for
a release that moved). Reading the release needs no image bytes.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import get_args

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pajson

from mmbu.benchmark_eval.parser import DEFAULT_REASONING, ReasoningMarkers
from mmbu.benchmark_eval.records import RecordsError, RunRecord, Status, read_records
from mmbu.benchmark_eval.release import ReleaseError, list_tasks, load_samples
from mmbu.benchmark_eval.scoring.reasoning import run_markers
from mmbu.core.release import FORMS, TEMPLATES, Task
from mmbu.core.runs import RunFile

RECORD_COLUMNS = ("sample_id", "task", "form", "template", "model", "prompt_version", "status", "output",
                  "error_reason", "image_size", "sent_size", "content_size", "content_offset", "box_format")
TEXT_COLUMNS = RECORD_COLUMNS[:9]
GEOMETRY_COLUMNS = RECORD_COLUMNS[9:]  # needed for detection records only
REQUIRED = ("sample_id", "task", "form", "template", "model", "prompt_version", "status", "request_hash")
ALLOWED = {"form": FORMS, "template": TEMPLATES, "status": get_args(Status)}
OPEN_ANSWER = "open_answer"  # the gold answer of the open form (see `open_answers`), added by `load_gold`


class RunInputError(Exception):
    """A run directory or its release cannot be used; the message names the path and the cause."""


@dataclass
class RunDir:
    path: Path
    model: str
    release_dir: Path
    records: pd.DataFrame  # one row per (sample, task, form, template): the newest record
    warnings: list[str] = field(default_factory=list)
    reasoning: ReasoningMarkers = DEFAULT_REASONING  # the model family's, stripped before parsing and judging
    # what each `mmbu eval run` on this directory was asked (run.json invocations): tasks, forms, templates, limit
    selections: list[dict] = field(default_factory=list)

    @property
    def judge_file(self) -> Path:
        return self.path / RunFile.JUDGE


def _run_json(run_dir: Path) -> dict:
    run_file = run_dir / RunFile.RUN
    if not run_file.exists():
        return {}
    try:
        meta = json.loads(run_file.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise RunInputError(f"{run_file}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
    return meta if isinstance(meta, dict) else {}


def _release_from_run_json(run_dir: Path) -> Path | None:
    meta = _run_json(run_dir)
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
    return _newest(pd.DataFrame(rows, columns=list(RECORD_COLUMNS)))


def _newest(frame: pd.DataFrame) -> pd.DataFrame:
    # records are in write order; a re-run (or a new prompt version) appends newer ones
    for name in ("output", "error_reason"):
        frame[name] = frame[name].astype(object).where(frame[name].notna(), None)
    return frame.drop_duplicates(["sample_id", "task", "form", "template"], keep="last").reset_index(drop=True)


def _current_prompt_version(frame: pd.DataFrame, predictions: Path, warnings: list[str]) -> pd.DataFrame:
    """Per configuration, only the records of the prompt version it was last asked with (newest-record frame).

    The prompt version is part of a record's key and request hash: a new one re-asks every record. Until that
    re-run is complete, the older records answer another prompt; mixed into one score they would make it the
    score of neither, so they are left out (and `coverage` counts them missing, which withholds the F1).
    """
    keys = ["task", "form", "template"]
    stale = frame["prompt_version"] != frame.groupby(keys, sort=False)["prompt_version"].transform("last")
    for (task, form, template), count in frame[stale].groupby(keys, sort=False).size().items():
        warnings.append(f"{predictions}: {count} records of an older prompt version in {task}/{form}/{template} "
                        f"are not scored (re-run `mmbu eval run` to ask them with the current prompts)")
    return frame[~stale].reset_index(drop=True)


def _complete_lines(path: Path, warnings: list[str]) -> pa.BufferReader | Path:
    """The file, or its bytes up to the last newline when a killed writer left half a line."""
    with open(path, "rb") as handle:
        handle.seek(0, 2)
        size = handle.tell()
        if size == 0:
            return path
        handle.seek(size - 1)
        if handle.read(1) == b"\n":
            return path
        handle.seek(0)
        data = handle.read()
    cut = data.rfind(b"\n") + 1
    line = data[:cut].count(b"\n") + 1
    warnings.append(f"{path}: line {line} is truncated (a run was killed mid-write); it was skipped")
    return pa.BufferReader(data[:cut])


def read_records_frame(path: Path, warnings: list[str]) -> pd.DataFrame | None:
    """Columnar read of a run file (pyarrow): the fast path for large runs.

    Returns None when the file does not fit the fast path (a damaged line, a missing field, a value
    outside the contract); the caller then reads it record by record, which names the bad line.
    Geometry columns are materialised for detection records only (the rest do not need them).
    """
    schema = pa.schema([(name, pa.string()) for name in (*TEXT_COLUMNS, "request_hash")])
    local: list[str] = []
    try:
        table = pajson.read_json(_complete_lines(path, local), parse_options=pajson.ParseOptions(
            explicit_schema=schema, unexpected_field_behavior="infer"))
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
        return None
    if table.num_rows == 0:
        return pd.DataFrame(columns=list(RECORD_COLUMNS))
    for name in REQUIRED:
        if table.column(name).null_count:
            return None
    for name, allowed in ALLOWED.items():
        if not pc.all(pc.is_in(table.column(name), value_set=pa.array(allowed))).as_py():
            return None
    frame = table.select(list(TEXT_COLUMNS)).to_pandas()
    detection = pc.equal(table.column("task"), Task.DETECTION.value)
    rows = pc.indices_nonzero(detection).to_numpy()
    for name in GEOMETRY_COLUMNS:
        column = pd.Series([None] * len(frame), dtype=object)
        if len(rows) and name in table.column_names:
            values = table.column(name).take(pa.array(rows)).to_pylist()
            column.iloc[rows] = pd.Series(values, index=rows, dtype=object)
        frame[name] = column
    warnings.extend(local)
    return _newest(frame)


def open_run(run_dir: str | Path, release_override: str | Path | None = None) -> RunDir:
    """Read a run directory's records and find its release; raises :class:`RunInputError`."""
    path = Path(run_dir)
    predictions = path / RunFile.PREDICTIONS
    if not predictions.is_file():
        raise RunInputError(f"{path}: no {RunFile.PREDICTIONS} (not a run directory made by `mmbu eval run`)")
    warnings: list[str] = []
    frame = read_records_frame(predictions, warnings)
    if frame is None:  # the careful reader names the damaged line, or copes with what arrow could not
        try:
            frame = records_frame(read_records(predictions, on_truncated=warnings.append))
        except RecordsError as exc:
            raise RunInputError(str(exc)) from None
    if frame.empty:
        raise RunInputError(f"{predictions}: no run records")
    release = Path(release_override) if release_override else _release_from_run_json(path)
    if release is None:
        raise RunInputError(f"{path}: {RunFile.RUN} does not name the release; pass --release DIR")
    if not release.is_dir():
        raise RunInputError(f"{release}: release directory does not exist (from {'--release' if release_override else path / RunFile.RUN})")
    models = sorted(frame["model"].unique())
    if len(models) > 1:
        raise RunInputError(f"{predictions}: records of several models ({', '.join(models)}); one run directory holds one model")
    frame = _current_prompt_version(frame, predictions, warnings)
    invocations = _run_json(path).get("invocations")
    selections = [item["selection"] for item in invocations if isinstance(item, dict)
                  and isinstance(item.get("selection"), dict)] if isinstance(invocations, list) else []
    return RunDir(path, models[0], release, frame, warnings, run_markers(path / RunFile.RUN, models[0]),
                  selections)


def coverage(run: RunDir, gold: dict[str, pd.DataFrame]) -> list[dict]:
    """Per configuration the run was asked for: records expected from the release, present, missing.

    The expectation is what `mmbu eval run` itself expected, over every invocation recorded in run.json
    (each one's tasks, forms, templates and first `limit` rows of each task). A run file cut short by a
    crash or a copy lacks records; scores of such a configuration would be scores of a different, smaller
    benchmark, so the scorer reports it as incomplete instead. A run.json without selections (a run not
    made by `mmbu eval run`) expects every release row of the configurations present.
    """
    records = run.records
    present_configs = [{"tasks": list(dict.fromkeys(records["task"])), "forms": list(dict.fromkeys(records["form"])),
                        "templates": list(dict.fromkeys(records["template"])), "limit": None}]
    wanted: dict[tuple[str, str, str], set[str]] = {}
    for selection in run.selections or present_configs:
        for task in selection.get("tasks") or []:
            if task not in gold:
                continue
            limit = selection.get("limit")
            ids = gold[task].index if limit is None else gold[task].index[: int(limit)]
            for form in selection.get("forms") or []:
                for template in selection.get("templates") or []:
                    wanted.setdefault((task, form, template), set()).update(ids)
    have = records.groupby(["task", "form", "template"])["sample_id"].agg(set).to_dict() if len(records) else {}
    rows = []
    for (task, form, template), ids in wanted.items():
        present = len(ids & have.get((task, form, template), set()))
        rows.append({"model": run.model, "task": task, "form": form, "template": template,
                     "expected": len(ids), "present": present, "missing": len(ids) - present})
    return rows


def open_answers(table: pd.DataFrame) -> pd.Series:
    """The open form's gold answer per row: the class (``label``) where the release has it, else ``answer``.

    They differ where the build left the class out of the options (``none_answer_rate``): the closed answer is
    then "None of the above", which answers no open question (README: the ``label`` column keeps the true
    class for the open form).
    """
    if "label" not in table:
        return table["answer"]
    return table["label"].where(table["label"].notna(), table["answer"])


def load_gold(release_dir: str | Path, tasks: list[str] | None = None) -> dict[str, pd.DataFrame]:
    """Per task: the release rows (no images), indexed by ``sample_id``, with :data:`OPEN_ANSWER` added."""
    try:
        present = list_tasks(release_dir)
        wanted = [t for t in (tasks or present) if t in present]
        missing = sorted(set(tasks or ()) - set(present))
        if missing:
            raise RunInputError(f"{release_dir}: the release has no task {', '.join(missing)} (it has {', '.join(present)})")
        tables = {task: load_samples(release_dir, task).set_index("sample_id", drop=False) for task in wanted}
        return {task: table.assign(**{OPEN_ANSWER: open_answers(table)}) for task, table in tables.items()}
    except ReleaseError as exc:
        raise RunInputError(str(exc)) from None
