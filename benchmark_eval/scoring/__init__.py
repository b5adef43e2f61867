"""Scores from run records: micro-F1, bootstrap CIs, closed−open deltas, baselines, breakdowns."""
from .bootstrap import Interval, bootstrap_f1, bootstrap_paired_delta, config_rng
from .metrics import detection_counts, f1_of_counts, greedy_match, iou_matrix, micro_f1

__all__ = [
    "Interval",
    "bootstrap_f1",
    "bootstrap_paired_delta",
    "config_rng",
    "detection_counts",
    "f1_of_counts",
    "greedy_match",
    "iou_matrix",
    "micro_f1",
]
