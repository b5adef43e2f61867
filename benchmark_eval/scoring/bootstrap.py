"""Seeded percentile bootstrap for micro-F1 and for paired differences of micro-F1.

A bootstrap resample draws n samples (or n images, when resampling by cluster) with replacement.
Micro-F1 depends on a resample only through *how many times each distinct row of counts* was
drawn, and those multiplicities follow a multinomial distribution with probabilities
``rows_with_that_value / n``. So instead of materialising 1,000 × n indices we collapse the rows
to their distinct values (a closed question has only two: (1,0,0) and (0,1,1)) and draw the
multiplicities directly: exact, not an approximation, and O(resamples × distinct rows).
:func:`bootstrap_loop` is the textbook one-resample-at-a-time version used to check it.
"""
from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from mmbu.benchmark_eval.scoring.metrics import micro_f1

DEFAULT_RESAMPLES = 1000
DEFAULT_CONFIDENCE = 0.95


@dataclass(frozen=True)
class Interval:
    """A point estimate with its percentile bootstrap interval."""

    estimate: float
    low: float
    high: float


def config_rng(seed: int, *key: str) -> np.random.Generator:
    """A generator for one configuration: the user's seed plus a stable hash of the key.

    Configurations get independent streams, and each is reproducible on its own (adding a model
    to the comparison does not change another model's interval).
    """
    digest = hashlib.sha256("\x1f".join(key).encode("utf-8")).digest()
    return np.random.default_rng([int(seed), int.from_bytes(digest[:8], "little")])


def cluster_sums(rows: np.ndarray, clusters: Sequence | np.ndarray | None) -> np.ndarray:
    """Rows summed per cluster (e.g. per image), in order of first appearance; rows unchanged if None."""
    rows = np.asarray(rows, float)
    if clusters is None:
        return rows
    _, first, inverse = np.unique(np.asarray(clusters), return_index=True, return_inverse=True)
    sums = np.zeros((len(first), rows.shape[1]))
    np.add.at(sums, inverse, rows)
    return sums[np.argsort(first)]


def resampled_sums(rows: np.ndarray, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """``(resamples, columns)`` column sums of bootstrap resamples of `rows` (multinomial form)."""
    rows = np.asarray(rows, float)
    n = rows.shape[0]
    if n == 0:
        return np.zeros((resamples, rows.shape[1]))
    distinct, counts = np.unique(rows, axis=0, return_counts=True)
    multiplicities = rng.multinomial(n, counts / n, size=resamples)
    return multiplicities @ distinct


def percentile_interval(values: np.ndarray, confidence: float = DEFAULT_CONFIDENCE) -> tuple[float, float]:
    """The central `confidence` percentile interval (2.5th and 97.5th percentiles for 0.95)."""
    tail = round((1 - confidence) * 50, 10)  # 2.5 for 0.95, without the float residue of 1 - 0.95
    low, high = np.percentile(values, [tail, 100 - tail])
    return float(low), float(high)


def _f1_columns(sums: np.ndarray, offset: int = 0) -> np.ndarray:
    return micro_f1(sums[:, offset], sums[:, offset + 1], sums[:, offset + 2])


def bootstrap_f1(
    counts: np.ndarray,
    *,
    resamples: int = DEFAULT_RESAMPLES,
    rng: np.random.Generator,
    clusters: Sequence | np.ndarray | None = None,
    confidence: float = DEFAULT_CONFIDENCE,
) -> Interval:
    """Micro-F1 of ``(n, 3)`` per-sample (TP, FP, FN) counts with its percentile bootstrap interval.

    With `clusters` (e.g. each sample's ``image_sha256``) whole clusters are resampled, which
    widens the interval honestly when several questions share an image.
    """
    counts = np.asarray(counts, float).reshape(-1, 3)
    estimate = float(micro_f1(*counts.sum(axis=0)))
    if counts.shape[0] == 0:
        return Interval(estimate, float("nan"), float("nan"))
    sums = resampled_sums(cluster_sums(counts, clusters), resamples, rng)
    return Interval(estimate, *percentile_interval(_f1_columns(sums), confidence))


def bootstrap_paired_delta(
    first: np.ndarray,
    second: np.ndarray,
    *,
    resamples: int = DEFAULT_RESAMPLES,
    rng: np.random.Generator,
    clusters: Sequence | np.ndarray | None = None,
    confidence: float = DEFAULT_CONFIDENCE,
) -> Interval:
    """F1(first) − F1(second) over the same samples (row i of both is sample i), paired bootstrap.

    Each resample draws samples once and scores both arms on them, so what the two arms share
    (the same hard images) cancels out of the interval.
    """
    first = np.asarray(first, float).reshape(-1, 3)
    second = np.asarray(second, float).reshape(-1, 3)
    if first.shape != second.shape:
        raise ValueError(f"paired arms differ in size: {first.shape[0]} vs {second.shape[0]} samples")
    estimate = float(micro_f1(*first.sum(axis=0)) - micro_f1(*second.sum(axis=0)))
    if first.shape[0] == 0:
        return Interval(estimate, float("nan"), float("nan"))
    sums = resampled_sums(cluster_sums(np.hstack([first, second]), clusters), resamples, rng)
    deltas = _f1_columns(sums, 0) - _f1_columns(sums, 3)
    return Interval(estimate, *percentile_interval(deltas, confidence))


def bootstrap_loop(
    rows: np.ndarray,
    statistic: Callable[[np.ndarray], float],
    *,
    resamples: int,
    rng: np.random.Generator,
    confidence: float = DEFAULT_CONFIDENCE,
) -> tuple[float, float]:
    """The plain bootstrap: draw n row indices with replacement, compute the statistic, repeat.

    Slow (one Python iteration and n indices per resample); kept as the reference the fast
    multinomial version is tested against.
    """
    rows = np.asarray(rows, float)
    values = [statistic(rows[rng.integers(0, len(rows), size=len(rows))]) for _ in range(resamples)]
    return percentile_interval(np.asarray(values), confidence)
