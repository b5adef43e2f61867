"""Scores from run records: micro-F1, bootstrap CIs, closed−open deltas, baselines, breakdowns, comparisons.

``score_runs(run_dirs, release, ScoreOptions(...))`` is what ``mmbu eval score`` does; the pieces
compose: :func:`load_outcomes` (per-record TP/FP/FN) → :func:`score_outcomes` (every aggregate).
"""
from mmbu.benchmark_eval.rundir import RunInputError, open_run
from mmbu.benchmark_eval.scoring.bootstrap import Interval, bootstrap_f1, bootstrap_paired_delta, config_rng
from mmbu.benchmark_eval.scoring.metrics import detection_counts, f1_of_counts, greedy_match, iou_matrix, micro_f1
from mmbu.benchmark_eval.scoring.scores import ScoreOptions, ScoreReport, load_outcomes, score_outcomes, score_runs

__all__ = [
    "Interval",
    "RunInputError",
    "ScoreOptions",
    "ScoreReport",
    "bootstrap_f1",
    "bootstrap_paired_delta",
    "config_rng",
    "detection_counts",
    "f1_of_counts",
    "greedy_match",
    "iou_matrix",
    "load_outcomes",
    "micro_f1",
    "open_run",
    "score_outcomes",
    "score_runs",
]
