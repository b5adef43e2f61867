"""Turn run records into per-record outcomes: (TP, FP, FN), parse path, judge state, baseline odds.

One row per record, joined to the release's gold answers and metadata. What is scored:

* ``status == "error"`` (the model never answered) — excluded from F1 and counted as a run error;
* closed — parsed by the strict parser; unparseable is wrong: (0, 1, 1). Beside it, the *assisted* counts: a
  reply the strict parser cannot read, read by the run's extractor (``mmbu eval judge --extract-closed``);
  never mixed into the strict counts;
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
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd
from PIL import Image

from mmbu.benchmark_eval.judge.cache import VerdictCache, verdict_key
from mmbu.benchmark_eval.judge.extraction_cache import assisted_label, extractions_of
from mmbu.benchmark_eval.judge.precheck import final_answer_text, read_open_answer
from mmbu.benchmark_eval.models.box_format import BoxFormat
from mmbu.benchmark_eval.parser import (extract_boxes, option_labels, parse_box_string, parse_closed_answer,
                                        to_original_pixels)
from mmbu.benchmark_eval.release import iter_images
from mmbu.benchmark_eval.rundir import OPEN_ANSWER, JudgeSelection, RunDir, RunInputError
from mmbu.benchmark_eval.scoring.baselines import open_label_odds, random_box_hit_odds
from mmbu.benchmark_eval.scoring.metrics import detection_counts
from mmbu.benchmark_eval.tasks.spec import TASK_SPECS
from mmbu.core.release import Form
from mmbu.core.runs import RunFile


class Outcome(NamedTuple):
    """What scoring one record gives: the columns `score_records` adds to it (besides the release metadata)."""

    scored: bool  # counted in F1 (False: a run error, a judge verdict pending or failed, a broken gold)
    tp: int
    fp: int
    fn: int
    parse_ok: bool  # the answer could be read (an option label, boxes, or open text)
    parse_path: str  # how it was read, or why it was not scored ("run_error", "judge_pending", ...)
    judge_state: str  # open classification: "precheck", "pending", "error" or the judge's method; else "n/a"
    random_p: float  # chance of being right under the random baseline
    n_gold: int  # gold items (options: 1; detection: the gold boxes)
    # the assisted score (closed answers the strict parser cannot read, as the extractor reads them); for any
    # other record the strict counts (None here, filled in by `score_records`)
    tp_assisted: int | None = None
    fp_assisted: int | None = None
    fn_assisted: int | None = None
    extraction: str = "n/a"  # closed: strict | extracted | none | pending | off (no extractor for the run)


OUTCOME_COLUMNS = Outcome._fields


def gold_label(options: list[str], answer: str) -> str | None:
    try:
        return option_labels(len(options))[list(options).index(answer)]
    except (ValueError, IndexError):
        return None


def gold_boxes(boxes, answer: str | None) -> list[tuple[float, float, float, float]]:
    """The release's ``boxes`` for the target (all instances), else the primary ``answer`` box."""
    if boxes is not None and len(boxes):
        return [tuple(float(v) for v in box) for box in boxes]
    primary = parse_box_string(str(answer or ""))
    return [primary] if primary else []


def release_image_sizes(release_dir: Path, task: str, sample_ids: list[str]) -> dict[str, tuple[int, int]]:
    """(width, height) of release images, read from the PNG headers only."""
    sizes = {}
    for item in iter_images(release_dir, task, sample_ids):
        with Image.open(io.BytesIO(item.image)) as image:
            sizes[item.sample_id] = image.size
    return sizes


ANSWER_COLUMNS = ("answer", OPEN_ANSWER, "options", "boxes", "answer_aliases")  # what is scored, not metadata
GOLD_COLUMNS = (*ANSWER_COLUMNS, "dataset_id")
GEOMETRY = ("image_size", "sent_size", "content_size", "content_offset", "box_format")


class RecordToScore(NamedTuple):
    """One run record joined to its gold answer: what scoring it reads (the columns of the joined table)."""

    sample_id: str
    form: str
    status: str
    output: str | None
    answer: str | None
    open_answer: str | None  # the release's answer for the open form (column `OPEN_ANSWER`)
    options: list[str] | None
    boxes: list | None
    answer_aliases: list[str] | None
    dataset_id: str | None
    image_size: tuple[int, int] | None  # detection: the geometry the runner recorded (`GEOMETRY`)
    sent_size: tuple[int, int] | None
    content_size: tuple[int, int] | None
    content_offset: tuple[int, int] | None
    box_format: dict | None


# the joined table's columns, in the record's order
SCORING_COLUMNS = tuple(OPEN_ANSWER if field == "open_answer" else field for field in RecordToScore._fields)
_RUN_ERROR = Outcome(False, 0, 0, 0, False, "run_error", "n/a", 0.0, 1)


class _RecordScorer:
    """Scores one record at a time, with caches for what repeats across records.

    Closed outputs repeat ("B", "Answer: C") and the same open answer meets the same gold across
    templates, so outcomes are cached per (answer, gold); the parser and the random-box odds keep their
    own caches.
    """

    def __init__(self, run: RunDir, judge: JudgeSelection | None, cache: VerdictCache | None, seed: int) -> None:
        self.run, self.judge, self.cache, self.seed = run, judge, cache, seed
        self.extractions = extractions_of(run.path)
        self._closed: dict[tuple[str, tuple[str, ...], str], Outcome] = {}
        self._open: dict[tuple, Outcome] = {}
        self._declared: object = None
        self._format: BoxFormat | None = None

    def closed(self, output: str | None, options, answer: str) -> Outcome:
        options = tuple(options) if options is not None else ()
        key = (output or "", options, answer)
        outcome = self._closed.get(key)
        if outcome is None:
            outcome = self._closed[key] = self._closed_outcome(output, options, answer)
        return outcome

    def _closed_outcome(self, output: str | None, options: tuple[str, ...], answer: str) -> Outcome:
        gold = gold_label(list(options), answer)
        if gold is None:
            # the release itself is inconsistent: the answer is not one of the options
            return Outcome(False, 0, 0, 0, False, "gold_not_in_options", "n/a", 0.0, 1)
        result = parse_closed_answer(output, options, self.run.reasoning)
        tp = int(result.label == gold)
        reply = final_answer_text(output, self.run.reasoning) if result.label is None else ""
        assisted, how = assisted_label(result.label, reply, options, self.extractions)
        tp_assisted = int(assisted == gold)
        return Outcome(True, tp, 1 - tp, 1 - tp, result.label is not None, result.path, "n/a", 1.0 / len(options), 1,
                       tp_assisted, 1 - tp_assisted, 1 - tp_assisted, how)

    def open_classification(self, output: str | None, answer: str, aliases, odds: float) -> Outcome:
        key = (output, answer, tuple(aliases) if aliases is not None else (), odds)
        outcome = self._open.get(key)
        if outcome is None:
            outcome = self._open[key] = self._judge_open(*key)
        return outcome

    def _judge_open(self, output: str | None, answer: str, aliases: tuple[str, ...], odds: float) -> Outcome:
        reply = read_open_answer(output, answer, aliases, self.run.reasoning)
        if reply.prechecked:
            return Outcome(True, 1, 0, 0, True, "precheck", "precheck", odds, 1)
        if self.judge is None or self.cache is None:
            return Outcome(False, 0, 0, 0, True, "judge_pending", "pending", odds, 1)
        entry = self.cache.latest(verdict_key(reply.text, answer, self.judge.judge_model, self.judge.prompt_version))
        if entry is None:
            return Outcome(False, 0, 0, 0, True, "judge_pending", "pending", odds, 1)
        if entry.verdict == "error":
            return Outcome(False, 0, 0, 0, True, "judge_error", "error", odds, 1)
        tp = int(entry.verdict == "equivalent")
        return Outcome(True, tp, 1 - tp, 1 - tp, True, f"judge:{entry.method}", entry.method, odds, 1)

    def _box_format(self, declared, where: str) -> BoxFormat:
        if declared is None:
            raise RunInputError(f"{self.run.path}: record {where} has no box_format; the model's declared box "
                                f"convention is needed to score detection")
        if declared != self._declared:  # one model, one convention: validate it once
            self._format, self._declared = BoxFormat.model_validate(declared), declared
        return self._format

    def open_detection(self, sample_id: str, output: str | None, gold: list, size, sent, content, offset, declared,
                       where: str) -> Outcome:
        odds = random_box_hit_odds(gold, size, seed=self.seed, key=sample_id)
        fmt = self._box_format(declared, where)
        extraction = extract_boxes(output, self.run.reasoning)
        sent = tuple(sent) if sent is not None else None
        content = tuple(content) if content is not None else None
        offset = tuple(offset) if offset is not None else None
        boxes = [b for b in (to_original_pixels(raw, fmt, size, sent, content, offset) for raw in extraction.boxes)
                 if b is not None]
        tp, fp, fn = detection_counts(boxes, gold)
        path = extraction.path if boxes else ("degenerate_boxes" if extraction.found else "unparseable:no_box")
        return Outcome(True, tp, fp, fn, bool(boxes), path, "n/a", odds, len(gold))


def score_records(run: RunDir, gold: dict[str, pd.DataFrame], *, seed: int = 0,
                  warn: Callable[[str], None] = lambda message: None, with_metadata: bool = True) -> pd.DataFrame:
    """Per-record outcomes of one run: the record keys, :data:`OUTCOME_COLUMNS` and the release metadata.

    The raw output and the box geometry are not carried over (they are scored here).
    """
    judge = run.judge_selection()
    scorer = _RecordScorer(run, judge, VerdictCache(run.path / RunFile.JUDGEMENTS) if judge else None, seed)
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
        gold_columns = [c for c in GOLD_COLUMNS if c in table]
        joined = records.merge(table[gold_columns], left_on="sample_id", right_index=True, how="left")
        for column in SCORING_COLUMNS:
            if column not in joined:
                joined[column] = None
        detection = TASK_SPECS[task].detection
        sizes = _detection_sizes(run, task, joined) if detection else {}
        label_odds = open_label_odds(table)
        rows = []
        for record in map(RecordToScore._make, zip(*(joined[c].tolist() for c in SCORING_COLUMNS))):
            if record.status != "ok":
                rows.append(_RUN_ERROR)
            elif record.form == Form.CLOSED:
                rows.append(scorer.closed(record.output, record.options, record.answer))
            elif detection:
                rows.append(scorer.open_detection(
                    record.sample_id, record.output, gold_boxes(record.boxes, record.answer), sizes[record.sample_id],
                    record.sent_size, record.content_size, record.content_offset, record.box_format,
                    f"{record.sample_id}/{record.form}"))
            else:
                rows.append(scorer.open_classification(record.output, record.open_answer, record.answer_aliases,
                                                       label_odds.get(record.dataset_id, 0.0)))
        outcome = pd.DataFrame(rows, columns=list(OUTCOME_COLUMNS), index=records.index)
        for column in ("tp", "fp", "fn"):  # the assisted counts of a record the extractor has no part in: the strict ones
            outcome[f"{column}_assisted"] = outcome[f"{column}_assisted"].fillna(outcome[column])
        inconsistent = records.loc[outcome["parse_path"] == "gold_not_in_options", "sample_id"]
        if len(inconsistent):
            warn(f"{run.release_dir}: {len(inconsistent)} {task} closed records have a gold answer that is not "
                 f"one of the options (first: '{inconsistent.iloc[0]}'); they are not scored")
        frames.append(records.drop(columns=["output", *GEOMETRY]).join(outcome))
    if not frames:
        raise RunInputError(f"{run.path}: no record matches a task and sample of the release {run.release_dir}")
    result = pd.concat(frames, ignore_index=True)
    for column in ("tp", "fp", "fn", "n_gold", "tp_assisted", "fp_assisted", "fn_assisted"):
        result[column] = result[column].astype(np.int64)
    return attach_metadata(result, gold) if with_metadata else result


def attach_metadata(outcomes: pd.DataFrame, gold: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """The release's metadata columns (modality, sub_modality, image_sha256, ...) joined on (task, sample)."""
    frames = []
    for task, part in outcomes.groupby("task", sort=False):
        table = gold[task]
        # release columns the records already carry (sample_id, task, ...) must not collide in the join
        # (dataset_id stays: a release field like modality, for --by)
        metadata = table.drop(columns=[c for c in table if c in ANSWER_COLUMNS or c in part.columns])
        frames.append(part.merge(metadata, left_on="sample_id", right_index=True, how="left"))
    return pd.concat(frames, ignore_index=True) if frames else outcomes


def _detection_sizes(run: RunDir, task: str, joined: pd.DataFrame) -> dict[str, tuple[int, int]]:
    sizes = {sid: tuple(size) for sid, size in zip(joined["sample_id"], joined["image_size"]) if size is not None}
    missing = [sid for sid in joined["sample_id"] if sid not in sizes]
    if missing:
        sizes.update(release_image_sizes(run.release_dir, task, missing))
    return sizes
