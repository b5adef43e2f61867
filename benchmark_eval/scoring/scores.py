"""Aggregate per-record outcomes into the ``scores.json`` contract, deltas, breakdowns and comparisons.

``scores.json`` is a list of records of two kinds (``kind`` tells them apart):

* ``{"kind": "score", "model", "task", "form", "template", "n", "f1", "ci_low", "ci_high",
  "random_baseline", "parse_failures", "judge_errors"}`` — ``n`` counts the scored records;
  ``parse_failures`` the scored records whose answer could not be read (counted wrong);
  ``judge_errors`` the open records left out of F1 because no verdict exists (judge failed, or
  ``mmbu eval judge`` has not run for them). Records whose model call failed are in neither.
* ``{"kind": "delta", "model", "task", "template", "delta", "ci_low", "ci_high"}`` —
  F1(closed) − F1(open) on the samples scored in both forms, paired bootstrap.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path

import numpy as np
import pandas as pd

from ..release import TASKS
from .baselines import expected_f1
from .bootstrap import DEFAULT_RESAMPLES, Interval, bootstrap_f1, bootstrap_paired_delta, config_rng
from .outcomes import score_records
from .rundir import RunInputError, load_gold, open_run

FORMS = ("closed", "open")
TEMPLATES = ("no_context", "modality", "full_context")
CONFIG = ["model", "task", "form", "template"]
CLUSTER_COLUMN = "image_sha256"


@dataclass(frozen=True)
class ScoreOptions:
    resamples: int = DEFAULT_RESAMPLES
    seed: int = 0
    cluster_by_image: bool = False
    by: tuple[str, ...] = ()


@dataclass
class ScoreReport:
    scores: list[dict]
    deltas: list[dict]
    breakdowns: list[dict]
    paired: list[dict]
    diagnostics: list[dict]
    outcomes: pd.DataFrame
    warnings: list[str] = field(default_factory=list)

    def contract_records(self) -> list[dict]:
        return [*self.scores, *self.deltas]


def _order(frame: pd.DataFrame) -> pd.DataFrame:
    """Canonical order: models as given, tasks as in the release, closed before open, templates as in §3.5."""
    keys = {
        "task": {t: i for i, t in enumerate(TASKS)},
        "form": {f: i for i, f in enumerate(FORMS)},
        "template": {t: i for i, t in enumerate(TEMPLATES)},
    }
    ranked = frame.assign(**{f"_{k}": frame[k].map(v).fillna(99) for k, v in keys.items() if k in frame})
    models = {m: i for i, m in enumerate(dict.fromkeys(frame["model"]))} if "model" in frame else {}
    if models:
        ranked["_model"] = frame["model"].map(models)
    order = [c for c in ("_model", "_task", "_form", "_template") if c in ranked]
    return ranked.sort_values(order, kind="stable").drop(columns=order)


def _counts(group: pd.DataFrame) -> np.ndarray:
    return group[["tp", "fp", "fn"]].to_numpy(dtype=float)


def _clusters(group: pd.DataFrame, options: ScoreOptions) -> np.ndarray | None:
    return group[CLUSTER_COLUMN].to_numpy() if options.cluster_by_image else None


def _rounded(value: float) -> float | None:
    return None if value is None or not np.isfinite(value) else round(float(value), 6)


def config_scores(outcomes: pd.DataFrame, options: ScoreOptions) -> list[dict]:
    """One ``score`` record per (model, task, form, template)."""
    records = []
    for (model, task, form, template), group in outcomes.groupby(CONFIG, sort=False):
        scored = group[group["scored"]]
        interval = bootstrap_f1(_counts(scored), resamples=options.resamples, clusters=_clusters(scored, options),
                                rng=config_rng(options.seed, model, task, form, template))
        if scored.empty:  # nothing scored yet (e.g. every open answer awaits the judge): no F1, not F1 = 0
            interval = Interval(float("nan"), float("nan"), float("nan"))
        records.append({
            "kind": "score", "model": model, "task": task, "form": form, "template": template,
            "n": int(len(scored)), "f1": _rounded(interval.estimate), "ci_low": _rounded(interval.low),
            "ci_high": _rounded(interval.high),
            "random_baseline": _rounded(expected_f1(scored["random_p"], scored["n_gold"])),
            "parse_failures": int((scored["scored"] & ~scored["parse_ok"].astype(bool)).sum()),
            "judge_errors": int(group["judge_state"].isin(["error", "pending"]).sum()),
        })
    return _order(pd.DataFrame(records)).to_dict("records") if records else []


def config_deltas(outcomes: pd.DataFrame, options: ScoreOptions) -> list[dict]:
    """One ``delta`` record per (model, task, template) with both forms: paired over shared samples."""
    scored = outcomes[outcomes["scored"]]
    records = []
    for (model, task, template), group in scored.groupby(["model", "task", "template"], sort=False):
        closed = group[group["form"] == "closed"].set_index("sample_id")
        opened = group[group["form"] == "open"].set_index("sample_id")
        shared = closed.index.intersection(opened.index)
        if closed.empty or opened.empty:
            continue
        closed, opened = closed.loc[shared], opened.loc[shared]
        interval = bootstrap_paired_delta(
            _counts(closed), _counts(opened), resamples=options.resamples,
            clusters=closed[CLUSTER_COLUMN].to_numpy() if options.cluster_by_image else None,
            rng=config_rng(options.seed, model, task, "delta", template))
        records.append({"kind": "delta", "model": model, "task": task, "template": template,
                        "delta": _rounded(interval.estimate), "ci_low": _rounded(interval.low),
                        "ci_high": _rounded(interval.high)})
    return _order(pd.DataFrame(records)).to_dict("records") if records else []


def breakdowns(outcomes: pd.DataFrame, by: Sequence[str], options: ScoreOptions) -> list[dict]:
    """Micro-F1 with CI per value of each metadata field in `by`, per configuration."""
    records = []
    scored = outcomes[outcomes["scored"]]
    for name in by:
        values = scored[name].astype(object).where(scored[name].notna(), "(missing)")
        for (model, task, form, template, value), group in scored.groupby([*CONFIG, values.rename("_value")], sort=False):
            interval = bootstrap_f1(_counts(group), resamples=options.resamples, clusters=_clusters(group, options),
                                    rng=config_rng(options.seed, model, task, form, template, name, str(value)))
            records.append({"model": model, "task": task, "form": form, "template": template, "field": name,
                            "value": value, "n": int(len(group)), "f1": _rounded(interval.estimate),
                            "ci_low": _rounded(interval.low), "ci_high": _rounded(interval.high),
                            "random_baseline": _rounded(expected_f1(group["random_p"], group["n_gold"]))})
    return _order(pd.DataFrame(records)).to_dict("records") if records else []


def sample_scores(group: pd.DataFrame) -> pd.Series:
    """Per-record F1 (1/0 for a single-answer question), the unit of a paired comparison."""
    tp, fp, fn = (group[c].to_numpy(float) for c in ("tp", "fp", "fn"))
    denominator = 2 * tp + fp + fn
    return pd.Series(np.divide(2 * tp, denominator, out=np.zeros_like(tp), where=denominator > 0), index=group.index)


def paired_comparisons(outcomes: pd.DataFrame) -> list[dict]:
    """Win/tie/loss of each pair of models on the records both have scored, per config and overall."""
    scored = outcomes[outcomes["scored"]].copy()
    scored["_score"] = sample_scores(scored)
    models = list(dict.fromkeys(scored["model"]))
    records = []
    for first, second in combinations(models, 2):
        keys = ["task", "form", "template", "sample_id"]
        a = scored[scored["model"] == first].set_index(keys)["_score"]
        b = scored[scored["model"] == second].set_index(keys)["_score"]
        both = pd.concat([a.rename("a"), b.rename("b")], axis=1, join="inner").reset_index()
        groups = [(("all", "all", "all"), both), *both.groupby(["task", "form", "template"], sort=False)]
        for (task, form, template), group in groups:
            wins, losses = int((group["a"] > group["b"]).sum()), int((group["a"] < group["b"]).sum())
            n = len(group)
            records.append({"model_a": first, "model_b": second, "task": task, "form": form, "template": template,
                            "n": n, "wins": wins, "ties": n - wins - losses, "losses": losses,
                            "win_rate": _rounded(wins / n) if n else None,
                            "loss_rate": _rounded(losses / n) if n else None})
    return records


def diagnostics(outcomes: pd.DataFrame) -> list[dict]:
    """Per configuration: run errors, parse failures, judge errors and pending verdicts, with rates."""
    records = []
    for (model, task, form, template), group in outcomes.groupby(CONFIG, sort=False):
        scored = group["scored"]
        run_errors = int((group["status"] != "ok").sum())
        parse_failures = int((scored & ~group["parse_ok"].astype(bool)).sum())
        judge_failed = int((group["judge_state"] == "error").sum())
        judge_pending = int((group["judge_state"] == "pending").sum())
        open_judgeable = int(group["judge_state"].isin(["precheck", "llm", "error", "pending"]).sum())
        records.append({
            "model": model, "task": task, "form": form, "template": template, "records": int(len(group)),
            "scored": int(scored.sum()), "run_errors": run_errors, "parse_failures": parse_failures,
            "parse_failure_rate": _rounded(parse_failures / scored.sum()) if scored.sum() else None,
            "judge_failed": judge_failed, "judge_pending": judge_pending,
            "judge_error_rate": _rounded((judge_failed + judge_pending) / open_judgeable) if open_judgeable else None,
            "precheck": int((group["judge_state"] == "precheck").sum()),
        })
    return _order(pd.DataFrame(records)).to_dict("records") if records else []


def score_outcomes(outcomes: pd.DataFrame, options: ScoreOptions, warnings: list[str] | None = None) -> ScoreReport:
    """Every aggregate of a per-record outcome table (one or more models)."""
    for name in options.by:
        if name not in outcomes.columns:
            raise RunInputError(f"--by {name}: no such field in the release (fields: "
                                f"{', '.join(c for c in outcomes.columns if outcomes[c].dtype == object)[:400]})")
    if options.cluster_by_image and CLUSTER_COLUMN not in outcomes.columns:
        raise RunInputError(f"--cluster-by-image: the release has no '{CLUSTER_COLUMN}' column to group samples by image")
    return ScoreReport(
        scores=config_scores(outcomes, options), deltas=config_deltas(outcomes, options),
        breakdowns=breakdowns(outcomes, options.by, options), paired=paired_comparisons(outcomes),
        diagnostics=diagnostics(outcomes), outcomes=outcomes, warnings=list(warnings or []),
    )


def load_outcomes(run_dirs: Sequence[str | Path], release: str | Path | None = None, *, seed: int = 0,
                  warn: Callable[[str], None] | None = None) -> tuple[pd.DataFrame, list[str]]:
    """Per-record outcomes of several runs, concatenated; the release is read once per directory."""
    warnings: list[str] = []
    sink = warn or warnings.append
    frames, gold_cache = [], {}
    seen_models: dict[str, Path] = {}
    for run_dir in run_dirs:
        run = open_run(run_dir, release)
        if run.model in seen_models:
            raise RunInputError(f"{run.path}: model '{run.model}' is also the model of {seen_models[run.model]}")
        seen_models[run.model] = run.path
        for message in run.warnings:
            sink(message)
        key = run.release_dir.resolve()
        if key not in gold_cache:
            gold_cache[key] = load_gold(run.release_dir)
        frames.append(score_records(run, gold_cache[key], seed=seed, warn=sink))
    return pd.concat(frames, ignore_index=True), warnings


def score_runs(run_dirs: Sequence[str | Path], release: str | Path | None = None,
               options: ScoreOptions = ScoreOptions()) -> ScoreReport:
    """Load, score and aggregate runs: the library face of ``mmbu eval score``."""
    outcomes, warnings = load_outcomes(run_dirs, release, seed=options.seed)
    return score_outcomes(outcomes, options, warnings)
