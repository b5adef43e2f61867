"""The read model of a run directory (``RUNS_DIR/<model>/``): what judge, score and report know of a run.

`open_run` reads the run records (``predictions.jsonl``, through `records.read_records_table`: the newest record per
configuration, of the prompt version each configuration was last asked with), finds the release the run was made on
(``run.json`` names it; ``--release`` overrides it, for a release that moved), the model family's reasoning markers
and what each `mmbu eval run` was asked; `RunDir.judge_selection` reads whose verdicts count (``judge.json``);
`load_gold` reads the release's rows (no image bytes) and `coverage` compares the two. The judge and the scorer both
read a run through it, and neither imports the other's reading.

Reasoning markers: the model family's, stripped before any answer is parsed or judged. Taken from the entry the run
was made with (``run.json`` records it), else from the registry by the records' model name; a model in neither gets
every marker the registry knows (stripping a marker a model never writes costs nothing; missing one would read its
reasoning as its answer). ``<think>`` is always among them.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import pandas as pd

from mmbu.benchmark_eval.models import ChatQuirks, default_registry
from mmbu.benchmark_eval.parser import DEFAULT_REASONING, THINK, ReasoningMarkers
from mmbu.benchmark_eval.records import RecordsError, read_records_table
from mmbu.benchmark_eval.release import ReleaseError, list_tasks, load_samples
from mmbu.core.runs import RunFile

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

    def judge_selection(self) -> JudgeSelection | None:
        """Whose verdicts count for this run (``judge.json``, written by `mmbu eval judge`), or None before it ran."""
        if not self.judge_file.exists():
            return None
        try:
            meta = json.loads(self.judge_file.read_text(encoding="utf-8"))
            return JudgeSelection(meta["judge_model"], meta["prompt_version"])
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            raise RunInputError(f"{self.judge_file}: not a judge description ({exc})") from None


@dataclass(frozen=True)
class JudgeSelection:
    """Which judge's verdicts count for a run: the judge model and its prompt version, as ``judge.json`` names them."""

    judge_model: str
    prompt_version: str


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


def open_run(run_dir: str | Path, release_override: str | Path | None = None) -> RunDir:
    """Read a run directory's records and find its release; raises :class:`RunInputError`."""
    path = Path(run_dir)
    predictions = path / RunFile.PREDICTIONS
    if not predictions.is_file():
        raise RunInputError(f"{path}: no {RunFile.PREDICTIONS} (not a run directory made by `mmbu eval run`)")
    warnings: list[str] = []
    try:
        frame = read_records_table(predictions, warnings)
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


class Coverage(NamedTuple):
    """One configuration a run was asked for: the records its selection calls for from the release, and how many
    of them the run file has."""

    model: str
    task: str
    form: str
    template: str
    expected: int
    present: int
    missing: int

    @property
    def config(self) -> tuple[str, str, str, str]:
        return self.model, self.task, self.form, self.template


def coverage(run: RunDir, gold: dict[str, pd.DataFrame]) -> list[Coverage]:
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
        rows.append(Coverage(run.model, task, form, template, len(ids), present, len(ids) - present))
    return rows


def open_answers(table: pd.DataFrame) -> pd.Series:
    """The open form's gold answer per row: the class (``label``) where the release has it, else ``answer``.

    They differ where the build left the class out of the options (``none_answer_rate``): the closed answer is
    then "None of the above", which answers no open question (docs/build.md: the ``label`` column keeps the true
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


def markers_of(chat: ChatQuirks | None) -> ReasoningMarkers:
    """The markers a registry entry declares, with ``<think>`` added."""
    if chat is None:
        return ReasoningMarkers(tuple(dict.fromkeys((THINK, *default_registry().reasoning_tags()))))
    pairs = (chat.thinking_tags, THINK) if chat.thinking_tags else (THINK,)
    return ReasoningMarkers(tuple(dict.fromkeys(pairs)), prefilled=chat.thinking_prefilled)


def run_markers(run_file: Path, model: str) -> ReasoningMarkers:
    """The markers for the run whose ``run.json`` is `run_file` and whose records name `model`."""
    chat = None
    try:
        entry = json.loads(run_file.read_text(encoding="utf-8")).get("entry") or {}
        if isinstance(entry, dict) and isinstance(entry.get("chat"), dict):
            chat = ChatQuirks.model_validate(entry["chat"])
    except (OSError, ValueError, AttributeError):
        chat = None  # no or older run.json: fall back to the registry
    if chat is None and (found := default_registry().find(model)) is not None:
        chat = found.chat
    return markers_of(chat)
