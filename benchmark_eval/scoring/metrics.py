"""Micro-F1 and its building blocks, over per-sample (TP, FP, FN) counts.

Every scored record contributes counts, and a configuration's score is the paper's micro-F1:

    F1 = 2·ΣTP / (2·ΣTP + ΣFP + ΣFN)

* Closed questions (all four tasks; for detection the options are candidate boxes): a correct
  label is (1, 0, 0); a wrong or unparseable one is (0, 1, 1) — a false positive for the label
  given and a false negative for the gold label. With one answer per question
  ΣFP = ΣFN = n − ΣTP, so micro-F1 = ΣTP / n = accuracy.
* Open classification: a verdict of *equivalent* is (1, 0, 0), *not equivalent* (0, 1, 1).
* Open detection: predicted boxes are matched greedily to the gold boxes at IoU ≥ 0.5
  (:func:`greedy_match`); TP = matched predictions, FP = unmatched predictions (1 when no box
  could be read), FN = unmatched gold boxes.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mmbu.core.boxes import iou

IOU_THRESHOLD = 0.5


def micro_f1(tp: float | np.ndarray, fp: float | np.ndarray, fn: float | np.ndarray) -> float | np.ndarray:
    """``2·tp / (2·tp + fp + fn)`` from summed counts (arrays broadcast); 0 when the denominator is 0."""
    tp, fp, fn = np.asarray(tp, float), np.asarray(fp, float), np.asarray(fn, float)
    denominator = 2 * tp + fp + fn
    with np.errstate(invalid="ignore", divide="ignore"):
        value = np.where(denominator > 0, 2 * tp / np.where(denominator > 0, denominator, 1), 0.0)
    return float(value) if value.ndim == 0 else value


def f1_of_counts(counts: np.ndarray) -> float:
    """Micro-F1 of an ``(n, 3)`` array of per-sample (TP, FP, FN)."""
    tp, fp, fn = np.asarray(counts, float).reshape(-1, 3).sum(axis=0)
    return float(micro_f1(tp, fp, fn))


def iou_matrix(predicted: Sequence[Sequence[float]], gold: Sequence[Sequence[float]]) -> np.ndarray:
    """IoU of every predicted box (rows) with every gold box (columns); boxes are ``x1, y1, x2, y2``.

    Areas are continuous (``(x2-x1)·(y2-y1)``), the convention of the release's pixel boxes.
    """
    p = np.asarray(predicted, float).reshape(-1, 4)
    g = np.asarray(gold, float).reshape(-1, 4)
    ix1 = np.maximum(p[:, None, 0], g[None, :, 0])
    iy1 = np.maximum(p[:, None, 1], g[None, :, 1])
    ix2 = np.minimum(p[:, None, 2], g[None, :, 2])
    iy2 = np.minimum(p[:, None, 3], g[None, :, 3])
    inter = np.clip(ix2 - ix1, 0, None) * np.clip(iy2 - iy1, 0, None)
    area_p = (p[:, 2] - p[:, 0]) * (p[:, 3] - p[:, 1])
    area_g = (g[:, 2] - g[:, 0]) * (g[:, 3] - g[:, 1])
    union = area_p[:, None] + area_g[None, :] - inter
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(union > 0, inter / np.where(union > 0, union, 1), 0.0)


def greedy_match(
    predicted: Sequence[Sequence[float]], gold: Sequence[Sequence[float]], threshold: float = IOU_THRESHOLD
) -> list[tuple[int, int, float]]:
    """Pairs ``(predicted index, gold index, IoU)``: repeatedly the highest remaining IoU ≥ `threshold`.

    Each box is used at most once. Ties go to the lower predicted index, then the lower gold
    index (the order the model wrote its boxes in), so the result is deterministic.
    """
    candidates = sorted(
        ((-value, i, j) for i, p in enumerate(predicted) for j, g in enumerate(gold)
         if (value := iou(p, g)) >= threshold)
    )
    pairs: list[tuple[int, int, float]] = []
    used_p: set[int] = set()
    used_g: set[int] = set()
    for negative, i, j in candidates:
        if i not in used_p and j not in used_g:
            pairs.append((i, j, -negative))
            used_p.add(i)
            used_g.add(j)
    return pairs


def detection_counts(
    predicted: Sequence[Sequence[float]], gold: Sequence[Sequence[float]], threshold: float = IOU_THRESHOLD
) -> tuple[int, int, int]:
    """(TP, FP, FN) of one open detection answer; no readable box at all counts as one false positive."""
    if len(predicted) == 0:
        return 0, 1, len(gold)
    matched = len(greedy_match(predicted, gold, threshold))
    return matched, len(predicted) - matched, len(gold) - matched
