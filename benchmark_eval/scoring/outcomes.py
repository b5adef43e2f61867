"""Turn run records into per-record outcomes: (TP, FP, FN), parse path, judge state, baseline odds.

One row per record, joined to the release's gold answers and metadata. What is scored:

* ``status == "error"`` (the model never answered) — excluded from F1 and counted as a run error;
* closed — parsed by the strict parser; unparseable is wrong: (0, 1, 1);
* open classification — the pre-check, else the cached verdict of the run's judge
  (``judge.json``); no verdict yet, or a judge error, is excluded from F1 and counted in
  ``judge_errors`` (never counted as wrong);
* open detection — boxes read from the answer, mapped to original pixels by the record's
  declared ``box_format``, greedily matched at IoU ≥ 0.5 to the gold boxes.

``random_p`` is each record's chance of being right under the random baseline and ``n_gold`` its
number of gold items; a configuration's baseline is ``2·Σp / (n + Σn_gold)`` (see
:mod:`.baselines`).
"""
from __future__ import annotations

import io
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image

from ..judge.cache import JUDGEMENTS_FILE, VerdictCache, verdict_key
from ..judge.precheck import final_answer_text, precheck_equivalent
from ..models.box_format import BoxFormat
from ..parser import (
    extract_boxes,
    option_labels,
    parse_box_string,
    parse_closed_answer,
    to_original_pixels,
)
from ..release import iter_images
from .baselines import open_label_odds, random_box_hit_odds
from .metrics import detection_counts
from .rundir import RunDir, RunInputError

DETECTION = "object_detection"
OUTCOME_COLUMNS = ("model", "task", "form", "template", "sample_id", "status", "scored", "tp", "fp", "fn",
                   "parse_ok", "parse_path", "judge_state", "random_p", "n_gold")


@dataclass(frozen=True)
class JudgeSelection:
    """Which judge's verdicts count for a run: the one recorded in ``judge.json`` by ``mmbu eval judge``."""

    judge_model: str
    prompt_version: str


def read_judge_selection(run: RunDir) -> JudgeSelection | None:
    if not run.judge_file.exists():
        return None
    try:
        meta = json.loads(run.judge_file.read_text(encoding="utf-8"))
        return JudgeSelection(meta["judge_model"], meta["prompt_version"])
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise RunInputError(f"{run.judge_file}: not a judge description ({exc})") from None


def gold_label(options: list[str], answer: str) -> str | None:
    try:
        return option_labels(len(options))[list(options).index(answer)]
    except (ValueError, IndexError):
        return None


def gold_boxes(row: pd.Series) -> list[tuple[float, float, float, float]]:
    """The release's ``boxes`` for the target (all instances), else the primary ``answer`` box."""
    boxes = row.get("boxes")
    if boxes is not None and len(boxes):
        return [tuple(float(v) for v in box) for box in boxes]
    primary = parse_box_string(str(row.get("answer") or ""))
    return [primary] if primary else []


def release_image_sizes(release_dir: Path, task: str, sample_ids: list[str]) -> dict[str, tuple[int, int]]:
    """(width, height) of release images, read from the PNG headers only."""
    sizes = {}
    for item in iter_images(release_dir, task, sample_ids):
        with Image.open(io.BytesIO(item.image)) as image:
            sizes[item.sample_id] = image.size
    return sizes


class _ClosedParser:
    """The strict parser with a cache: closed outputs repeat a lot ("B", "Answer: C")."""

    def __init__(self) -> None:
        self._cache: dict[tuple[str, tuple[str, ...]], tuple[str | None, str]] = {}

    def __call__(self, output: str | None, options: tuple[str, ...]) -> tuple[str | None, str]:
        key = (output or "", options)
        hit = self._cache.get(key)
        if hit is None:
            parsed = parse_closed_answer(output, options)
            hit = self._cache[key] = (parsed.label, parsed.path)
        return hit


def score_records(run: RunDir, gold: dict[str, pd.DataFrame], *, seed: int = 0,
                  warn: Callable[[str], None] = lambda message: None) -> pd.DataFrame:
    """Per-record outcomes of one run (columns :data:`OUTCOME_COLUMNS` plus the release metadata)."""
    judge = read_judge_selection(run)
    cache = VerdictCache(run.path / JUDGEMENTS_FILE) if judge else None
    parse = _ClosedParser()
    frames = []
    for task, records in run.records.groupby("task", sort=False):
        if task not in gold:
            warn(f"{run.path}: {len(records)} records of task '{task}', which the release does not have; skipped")
            continue
        table = gold[task]
        known = records["sample_id"].isin(table.index)
        if not known.all():
            missing = records.loc[~known, "sample_id"]
            warn(f"{run.path}: {len(missing)} {task} records name samples not in the release "
                 f"(first: '{missing.iloc[0]}'); skipped")
            records = records[known]
        joined = records.merge(table.drop(columns=["sample_id"]), left_on="sample_id", right_index=True,
                               how="left", suffixes=("", "_release"))
        if task == DETECTION:
            sizes = _detection_sizes(run, task, joined)
        label_odds = open_label_odds(table)
        rows = []
        for row in joined.itertuples(index=False):
            if row.status != "ok":
                outcome = (False, 0, 0, 0, False, "run_error", "n/a", 0.0, 1)
            elif row.form == "closed":
                outcome = _closed(row, parse)
            elif task == DETECTION:
                outcome = _open_detection(row, sizes[row.sample_id], seed, run)
            else:
                outcome = _open_classification(row, judge, cache, label_odds)
            rows.append(outcome)
        outcome_frame = pd.DataFrame(rows, columns=["scored", "tp", "fp", "fn", "parse_ok", "parse_path",
                                                    "judge_state", "random_p", "n_gold"], index=joined.index)
        frames.append(pd.concat([joined, outcome_frame], axis=1))
    if not frames:
        raise RunInputError(f"{run.path}: no record matches a task and sample of the release {run.release_dir}")
    result = pd.concat(frames, ignore_index=True)
    for column in ("tp", "fp", "fn", "n_gold"):
        result[column] = result[column].astype(np.int64)
    return result


def _closed(row, parse: _ClosedParser) -> tuple:
    options = tuple(row.options) if row.options is not None else ()
    gold = gold_label(list(options), row.answer)
    if gold is None:
        # the release itself is inconsistent: the answer is not one of the options
        return (False, 0, 0, 0, False, "gold_not_in_options", "n/a", 0.0, 1)
    label, path = parse(row.output, options)
    tp = int(label == gold)
    return (True, tp, 1 - tp, 1 - tp, label is not None, path, "n/a", 1.0 / len(options), 1)


def _open_classification(row, judge: JudgeSelection | None, cache: VerdictCache | None,
                         label_odds: dict[str, float]) -> tuple:
    odds = label_odds.get(row.dataset_id, 0.0)
    aliases = list(row.answer_aliases) if getattr(row, "answer_aliases", None) is not None else []
    if precheck_equivalent(row.output, row.answer, aliases):
        return (True, 1, 0, 0, True, "precheck", "precheck", odds, 1)
    if judge is None or cache is None:
        return (False, 0, 0, 0, True, "judge_pending", "pending", odds, 1)
    entry = cache.latest(verdict_key(final_answer_text(row.output), row.answer, judge.judge_model, judge.prompt_version))
    if entry is None:
        return (False, 0, 0, 0, True, "judge_pending", "pending", odds, 1)
    if entry.verdict == "error":
        return (False, 0, 0, 0, True, "judge_error", "error", odds, 1)
    tp = int(entry.verdict == "equivalent")
    return (True, tp, 1 - tp, 1 - tp, True, f"judge:{entry.method}", entry.method, odds, 1)


def _detection_sizes(run: RunDir, task: str, joined: pd.DataFrame) -> dict[str, tuple[int, int]]:
    sizes = {sid: tuple(size) for sid, size in zip(joined["sample_id"], joined["image_size"]) if size is not None}
    missing = [sid for sid in joined["sample_id"] if sid not in sizes]
    if missing:
        sizes.update(release_image_sizes(run.release_dir, task, missing))
    return sizes


def _open_detection(row, size: tuple[int, int], seed: int, run: RunDir) -> tuple:
    gold = gold_boxes(row._asdict() if hasattr(row, "_asdict") else row)
    odds = random_box_hit_odds(gold, size, seed=seed, key=row.sample_id)
    if row.box_format is None:
        raise RunInputError(f"{run.path}: record {row.sample_id}/{row.form}/{row.template} has no box_format; "
                            f"the model's declared box convention is needed to score detection")
    fmt = BoxFormat.model_validate(row.box_format)
    extraction = extract_boxes(row.output)
    sent = tuple(row.sent_size) if row.sent_size is not None else None
    content = getattr(row, "content_size", None)
    content = tuple(content) if content is not None else None
    boxes = [b for b in (to_original_pixels(raw, fmt, size, sent, content) for raw in extraction.boxes) if b is not None]
    tp, fp, fn = detection_counts(boxes, gold)
    path = extraction.path if boxes else ("degenerate_boxes" if extraction.found else "unparseable:no_box")
    return (True, tp, fp, fn, bool(boxes), path, "n/a", odds, len(gold))
