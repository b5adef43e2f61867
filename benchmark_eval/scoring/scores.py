"""Aggregate per-record outcomes into the ``scores.json`` contract, deltas, breakdowns and comparisons.

``scores.json`` is a list of records of two kinds (``kind`` tells them apart), typed in `results.py`, which says
what each field holds: a `ConfigScore` (``"kind": "score"``) per (model, task, form, template), then a `Delta`
(``"kind": "delta"``) per (model, task, template) with both forms. ``f1`` is the strict score (the paper's
protocol): an answer the parser cannot read is wrong; records whose model call failed, and open answers without a
verdict, are left out. ``assisted_f1`` (closed forms of a run judged with ``--extract-closed``, else null) reads the
replies the strict parser cannot read with the run's extractor and is never mixed into ``f1``. With the runs'
coverage (`rundir.coverage`), ``expected`` / ``missing`` say how many records the run's selection (run.json) calls
for and how many of them the run file lacks (or has only for an older prompt version than the configuration's
newest); a configuration with missing records has no ``f1`` or CI (it would be the score of a smaller benchmark),
and one with no record at all is still listed. Δ = F1(closed) − F1(open) on the samples scored in both forms,
paired bootstrap. Breakdowns, paired comparisons, diagnostics and the overall means go beside it.
"""
from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from functools import lru_cache
from itertools import combinations
from pathlib import Path
from typing import TypeVar

import numpy as np
import pandas as pd
from pandas.api.types import is_string_dtype

from mmbu.benchmark_eval.rundir import Coverage, RunInputError, coverage, load_gold, open_run
from mmbu.benchmark_eval.scoring.baselines import expected_f1
from mmbu.benchmark_eval.scoring.bootstrap import (DEFAULT_RESAMPLES, Interval, bootstrap_f1, bootstrap_paired_delta,
                                                   config_rng)
from mmbu.benchmark_eval.scoring.outcomes import OUTCOME_COLUMNS, attach_metadata, score_records
from mmbu.benchmark_eval.scoring.overall import overall_scores
from mmbu.benchmark_eval.scoring.results import (Breakdown, ConfigScore, Delta, Diagnostics, OverallDelta, OverallScore,
                                                 PairedComparison)
from mmbu.core.release import FORMS, TASKS, TEMPLATES, Form

CONFIG = ["model", "task", "form", "template"]
CLUSTER_COLUMN = "image_sha256"
OUTCOME_FIELDS = {*CONFIG, "sample_id", "prompt_version", "status", "error_reason", *OUTCOME_COLUMNS}  # not release fields


@dataclass(frozen=True)
class ScoreOptions:
    resamples: int = DEFAULT_RESAMPLES
    seed: int = 0
    cluster_by_image: bool = False
    by: tuple[str, ...] = ()


@dataclass
class ScoreReport:
    scores: list[ConfigScore]
    deltas: list[Delta]
    breakdowns: list[Breakdown]
    paired: list[PairedComparison]
    diagnostics: list[Diagnostics]
    outcomes: pd.DataFrame
    warnings: list[str] = field(default_factory=list)
    coverage: list[Coverage] = field(default_factory=list)  # expected / present / missing per run configuration

    @property
    def overall(self) -> list[OverallScore | OverallDelta]:
        """The mean of the tasks' F1 per model, form and template, and its closed − open (`overall.py`)."""
        return overall_scores(self.scores)

    @property
    def incomplete(self) -> list[Coverage]:
        """The configurations whose run lacks records the release and the run's selection call for."""
        return [row for row in self.coverage if row.missing]

    def score_records(self) -> list[dict]:
        """The score records as scores.json and scores.csv spell them."""
        return [item.as_record(with_coverage=bool(self.coverage)) for item in self.scores]

    def contract_records(self) -> list[dict]:
        """scores.json: the score records, then the deltas."""
        return [*self.score_records(), *(item.as_record() for item in self.deltas)]


Ordered = TypeVar("Ordered", ConfigScore, Delta, Breakdown, Diagnostics)


def _ordered(items: list[Ordered]) -> list[Ordered]:
    """Canonical order: models as given, tasks as in the release, closed before open, templates as in §3.5."""
    models = {model: index for index, model in enumerate(dict.fromkeys(item.model for item in items))}

    def rank(values: tuple[str, ...], value: str | None) -> int:
        return values.index(value) if value in values else len(values)

    return sorted(items, key=lambda item: (models[item.model], rank(TASKS, item.task),
                                           rank(FORMS, getattr(item, "form", None)), rank(TEMPLATES, item.template)))


def _rounded(value: float) -> float | None:
    return None if value is None or not np.isfinite(value) else round(float(value), 6)


def _by_column(name: str) -> str:
    return f"by:{name}"


def slim_outcomes(outcomes: pd.DataFrame, options: ScoreOptions) -> pd.DataFrame:
    """Only the columns aggregation needs (wide metadata makes every pandas slice slow at 10⁶ rows).

    ``cluster`` is the resampling unit: the image (``image_sha256``) with ``--cluster-by-image``,
    else the record itself.
    """
    columns = [*CONFIG, "sample_id", "status", "scored", "parse_ok", "judge_state", "tp", "fp", "fn",
               "random_p", "n_gold"]
    frame = outcomes[columns].copy()
    # outcome tables written without an extractor (or by hand) have no assisted counts: the strict ones stand
    for column in ("tp", "fp", "fn"):
        frame[f"{column}_assisted"] = outcomes.get(f"{column}_assisted", outcomes[column])
    frame["extraction"] = outcomes.get("extraction", "off")
    if options.cluster_by_image:
        codes = pd.factorize(outcomes[CLUSTER_COLUMN])[0]
        missing = codes < 0  # a record without an image hash is its own cluster
        codes[missing] = codes.max(initial=-1) + 1 + np.arange(int(missing.sum()))
        frame["cluster"] = codes
    else:
        frame["cluster"] = np.arange(len(frame))
    for name in options.by:
        frame[_by_column(name)] = outcomes[name].astype(object).where(outcomes[name].notna(), "(missing)")
    return frame


def groups(frame: pd.DataFrame, keys: list[str]):
    """``(key tuple, row positions)`` per group, in order of first appearance, without pandas slicing."""
    if frame.empty:
        return
    codes = frame.groupby(keys, sort=False, dropna=False).ngroup().to_numpy()
    order = np.argsort(codes, kind="stable")
    bounds = np.flatnonzero(np.diff(codes[order])) + 1
    firsts = order[np.r_[0, bounds]]
    for key, rows in zip(frame[keys].to_numpy(object)[firsts], np.split(order, bounds)):
        yield tuple(key), rows


def _arrays(frame: pd.DataFrame, prefix: str = "") -> tuple[np.ndarray, np.ndarray]:
    counts = frame[[f"tp{prefix}", f"fp{prefix}", f"fn{prefix}"]].to_numpy(dtype=float)
    return counts, frame["cluster"].to_numpy()


def config_scores(frame: pd.DataFrame, options: ScoreOptions) -> list[ConfigScore]:
    """One ``score`` record per (model, task, form, template) of a :func:`slim_outcomes` frame."""
    counts, clusters = _arrays(frame)
    scored = frame["scored"].to_numpy(bool)
    parse_failed = scored & ~frame["parse_ok"].to_numpy(bool)
    judge_errors = frame["judge_state"].isin(["error", "pending"]).to_numpy()
    random_p, n_gold = frame["random_p"].to_numpy(float), frame["n_gold"].to_numpy(float)
    assisted_counts, _ = _arrays(frame, "_assisted")
    extraction = frame["extraction"].to_numpy(object)
    records = []
    for (model, task, form, template), rows in groups(frame, CONFIG):
        kept = rows[scored[rows]]
        interval = bootstrap_f1(counts[kept], resamples=options.resamples,
                                clusters=clusters[kept] if options.cluster_by_image else None,
                                rng=config_rng(options.seed, model, task, form, template))
        if not len(kept):  # nothing scored yet (e.g. every open answer awaits the judge): no F1, not F1 = 0
            interval = Interval(float("nan"), float("nan"), float("nan"))
        # the assisted score exists for closed configurations whose run has an extractor; never mixed into f1
        assisted = Interval(float("nan"), float("nan"), float("nan"))
        if form == Form.CLOSED and len(kept) and (extraction[kept] != "off").any():
            assisted = bootstrap_f1(assisted_counts[kept], resamples=options.resamples,
                                    clusters=clusters[kept] if options.cluster_by_image else None,
                                    rng=config_rng(options.seed, model, task, form, template, "assisted"))
        records.append(ConfigScore(
            model, task, form, template, n=int(len(kept)), f1=_rounded(interval.estimate),
            ci_low=_rounded(interval.low), ci_high=_rounded(interval.high),
            random_baseline=_rounded(expected_f1(random_p[kept], n_gold[kept])),
            parse_failures=int(parse_failed[rows].sum()), judge_errors=int(judge_errors[rows].sum()),
            unparseable_share=_rounded(parse_failed[kept].sum() / len(kept)) if form == Form.CLOSED and len(kept) else None,
            assisted_f1=_rounded(assisted.estimate), assisted_ci_low=_rounded(assisted.low),
            assisted_ci_high=_rounded(assisted.high), extracted=int((extraction[kept] == "extracted").sum())))
    return _ordered(records)


def config_deltas(frame: pd.DataFrame, options: ScoreOptions) -> list[Delta]:
    """One ``delta`` record per (model, task, template) with both forms: paired over shared samples."""
    keys = ["model", "task", "template", "sample_id"]
    scored = frame[frame["scored"]]
    closed = scored.loc[scored["form"] == Form.CLOSED, [*keys, "tp", "fp", "fn", "cluster"]]
    opened = scored.loc[scored["form"] == Form.OPEN, [*keys, "tp", "fp", "fn"]]
    both = closed.merge(opened, on=keys, suffixes=("", "_open"))
    first, clusters = _arrays(both)
    second, _ = _arrays(both, "_open")
    records = []
    for (model, task, template), rows in groups(both, ["model", "task", "template"]):
        interval = bootstrap_paired_delta(
            first[rows], second[rows], resamples=options.resamples,
            clusters=clusters[rows] if options.cluster_by_image else None,
            rng=config_rng(options.seed, model, task, "delta", template))
        records.append(Delta(model, task, template, delta=_rounded(interval.estimate), ci_low=_rounded(interval.low),
                             ci_high=_rounded(interval.high)))
    return _ordered(records)


def breakdowns(frame: pd.DataFrame, by: Sequence[str], options: ScoreOptions) -> list[Breakdown]:
    """Micro-F1 with CI per value of each metadata field in `by`, per configuration."""
    scored = frame[frame["scored"]]
    counts, clusters = _arrays(scored)
    random_p, n_gold = scored["random_p"].to_numpy(float), scored["n_gold"].to_numpy(float)
    records = []
    for name in by:
        for (model, task, form, template, value), rows in groups(scored, [*CONFIG, _by_column(name)]):
            interval = bootstrap_f1(counts[rows], resamples=options.resamples,
                                    clusters=clusters[rows] if options.cluster_by_image else None,
                                    rng=config_rng(options.seed, model, task, form, template, name, str(value)))
            records.append(Breakdown(model, task, form, template, field=name, value=value, n=int(len(rows)),
                                     f1=_rounded(interval.estimate), ci_low=_rounded(interval.low),
                                     ci_high=_rounded(interval.high),
                                     random_baseline=_rounded(expected_f1(random_p[rows], n_gold[rows]))))
    return _ordered(records)


def sample_scores(frame: pd.DataFrame) -> np.ndarray:
    """Per-record F1 (1/0 for a single-answer question), the unit of a paired comparison."""
    tp, fp, fn = (frame[c].to_numpy(float) for c in ("tp", "fp", "fn"))
    denominator = 2 * tp + fp + fn
    return np.divide(2 * tp, denominator, out=np.zeros_like(tp), where=denominator > 0)


def paired_comparisons(frame: pd.DataFrame) -> list[PairedComparison]:
    """Win/tie/loss of each pair of models on the records both have scored, per config and overall."""
    keys = ["task", "form", "template", "sample_id"]
    scored = frame.loc[frame["scored"], ["model", *keys]].assign(score=sample_scores(frame[frame["scored"]]))
    models = list(dict.fromkeys(scored["model"]))
    records = []
    for first, second in combinations(models, 2):
        a = scored.loc[scored["model"] == first, [*keys, "score"]]
        b = scored.loc[scored["model"] == second, [*keys, "score"]]
        both = a.merge(b, on=keys, suffixes=("_a", "_b"))
        both["wins"] = both["score_a"] > both["score_b"]
        both["losses"] = both["score_a"] < both["score_b"]
        tallies = both.groupby(["task", "form", "template"], sort=False)[["wins", "losses"]].agg(["sum", "size"])
        rows = [(("all", "all", "all"), int(both["wins"].sum()), int(both["losses"].sum()), len(both))]
        rows += [(key, int(t[("wins", "sum")]), int(t[("losses", "sum")]), int(t[("wins", "size")]))
                 for key, t in tallies.iterrows()]
        for (task, form, template), wins, losses, n in rows:
            records.append(PairedComparison(first, second, task, form, template, n=n, wins=wins,
                                            ties=n - wins - losses, losses=losses,
                                            win_rate=_rounded(wins / n) if n else None,
                                            loss_rate=_rounded(losses / n) if n else None))
    return records


def diagnostics(frame: pd.DataFrame) -> list[Diagnostics]:
    """Per configuration: run errors, parse failures, judge errors and pending verdicts, with rates."""
    flags = pd.DataFrame({
        "records": 1, "scored": frame["scored"].astype(int), "run_errors": (frame["status"] != "ok").astype(int),
        "parse_failures": (frame["scored"] & ~frame["parse_ok"].astype(bool)).astype(int),
        "judge_failed": (frame["judge_state"] == "error").astype(int),
        "judge_pending": (frame["judge_state"] == "pending").astype(int),
        "judgeable": frame["judge_state"].isin(["precheck", "llm", "error", "pending"]).astype(int),
        "precheck": (frame["judge_state"] == "precheck").astype(int),
    })
    totals = flags.groupby([frame[c] for c in CONFIG], sort=False).sum().reset_index()
    records = []
    for item in totals.to_dict("records"):
        judgeable = item.pop("judgeable")
        item["parse_failure_rate"] = _rounded(item["parse_failures"] / item["scored"]) if item["scored"] else None
        item["judge_error_rate"] = (_rounded((item["judge_failed"] + item["judge_pending"]) / judgeable)
                                    if judgeable else None)
        records.append(Diagnostics(**{key: (int(value) if isinstance(value, (np.integer, int)) else value)
                                      for key, value in item.items()}))
    return _ordered(records)


def score_outcomes(outcomes: pd.DataFrame, options: ScoreOptions, warnings: list[str] | None = None,
                   coverage: list[Coverage] | None = None) -> ScoreReport:
    """Every aggregate of a per-record outcome table (one or more models).

    With `coverage` (see `rundir.coverage`), a configuration that lacks records gets no F1: its score
    record says how many were expected and missing, and configurations with no record at all appear too.
    """
    for name in options.by:
        if name not in outcomes.columns:
            fields = [c for c in outcomes.columns if c not in OUTCOME_FIELDS and is_string_dtype(outcomes[c])]
            raise RunInputError(f"--by {name}: no such field in the release (fields: {', '.join(fields)[:400]})")
    if options.cluster_by_image and CLUSTER_COLUMN not in outcomes.columns:
        raise RunInputError(f"--cluster-by-image: the release has no '{CLUSTER_COLUMN}' column to group samples by image")
    frame = slim_outcomes(outcomes, options)
    return ScoreReport(
        scores=with_coverage(config_scores(frame, options), coverage or []), deltas=config_deltas(frame, options),
        breakdowns=breakdowns(frame, options.by, options), paired=paired_comparisons(frame),
        diagnostics=diagnostics(frame), outcomes=outcomes, warnings=list(warnings or []), coverage=list(coverage or []),
    )


def with_coverage(scores: list[ConfigScore], coverage: list[Coverage]) -> list[ConfigScore]:
    """Score records with `expected` and `missing`; an incomplete configuration's F1 and CI are withheld."""
    if not coverage:
        return scores
    by_config = {item.config: item for item in scores}
    merged = []
    for row in coverage:
        item = by_config.pop(row.config, None) or ConfigScore.unscored(*row.config)
        item = replace(item, expected=row.expected, missing=row.missing)
        if row.missing:  # scored as if whole, it would be the score of another, smaller benchmark
            item = replace(item, f1=None, ci_low=None, ci_high=None, assisted_f1=None, assisted_ci_low=None,
                           assisted_ci_high=None)
        merged.append(item)
    merged += by_config.values()  # configurations outside the run's selection (records of an earlier run)
    return _ordered(merged)


def _score_run_in_worker(run_dir: str, release: str | None,
                         seed: int) -> tuple[str, str, str, pd.DataFrame, list[str], list[Coverage]]:
    run = open_run(run_dir, release)
    warnings = list(run.warnings)
    gold = _gold_in_worker(str(run.release_dir.resolve()))
    frame = score_records(run, gold, seed=seed, warn=warnings.append, with_metadata=False)
    return run.model, str(run.path), str(run.release_dir.resolve()), frame, warnings, coverage(run, gold)


def _gold_in_worker(release_dir: str) -> dict[str, pd.DataFrame]:
    """The release's gold tables, read once per process while the Parquet files are unchanged."""
    files = sorted(Path(release_dir).glob("data/*/*.parquet"))
    fingerprint = tuple((str(f), f.stat().st_mtime_ns, f.stat().st_size) for f in files)
    return _load_gold_cached(release_dir, fingerprint)


@lru_cache(maxsize=4)
def _load_gold_cached(release_dir: str, fingerprint: tuple) -> dict[str, pd.DataFrame]:
    return load_gold(release_dir)


def load_outcomes(run_dirs: Sequence[str | Path], release: str | Path | None = None, *, seed: int = 0,
                  jobs: int = 1, warn: Callable[[str], None] | None = None,
                  progress: Callable[[str], None] | None = None) -> tuple[pd.DataFrame, list[str], list[Coverage]]:
    """Per-record outcomes of several runs, concatenated, with the release metadata attached.

    With `jobs` > 1 the runs are scored in that many worker processes; the result is the same.
    Workers cost some CPU (start-up, pickling) and pay off only when cores are free (see
    benchmarks/RESULTS.md, "Scoring throughput"). `progress` is called with each run's directory
    once it is scored.
    """
    warnings: list[str] = []
    sink = warn or warnings.append
    arguments = ([str(d) for d in run_dirs], [str(release) if release is not None else None] * len(run_dirs),
                 [seed] * len(run_dirs))
    frames, seen_models, covered = [], {}, []
    with ExitStack() as stack:
        if jobs > 1 and len(run_dirs) > 1:
            context = multiprocessing.get_context("spawn")  # no fork of a process holding Arrow's thread pool
            pool = stack.enter_context(ProcessPoolExecutor(max_workers=min(jobs, len(run_dirs)), mp_context=context))
            results = pool.map(_score_run_in_worker, *arguments)
        else:
            results = map(_score_run_in_worker, *arguments)
        for model, path, release_dir, frame, run_warnings, run_coverage in results:
            if model in seen_models:
                raise RunInputError(f"{path}: model '{model}' is also the model of {seen_models[model]}")
            seen_models[model] = path
            for message in run_warnings:
                sink(message)
            frames.append(attach_metadata(frame, _gold_in_worker(release_dir)))
            covered += run_coverage
            if progress:
                progress(path)
    return pd.concat(frames, ignore_index=True), warnings, covered


def score_runs(run_dirs: Sequence[str | Path], release: str | Path | None = None,
               options: ScoreOptions = ScoreOptions(), jobs: int = 1,
               progress: Callable[[str], None] | None = None) -> ScoreReport:
    """Load, score and aggregate runs: the library face of ``mmbu eval score``."""
    outcomes, warnings, covered = load_outcomes(run_dirs, release, seed=options.seed, jobs=jobs, progress=progress)
    return score_outcomes(outcomes, options, warnings, covered)
