"""Random baselines: the expected micro-F1 of a model that answers uniformly at random.

Each record gets ``p`` = its chance of a hit under the random answerer and ``g`` = its number of
gold items. One random prediction per record gives TP ~ Bernoulli(p), FP = 1 − TP, FN = g − TP,
so micro-F1 = 2·ΣTP / (n + Σg) — linear in ΣTP — and its expectation is exactly

    baseline = 2·Σp / (n + Σg)          (= mean p when every g is 1)

* closed (every task, detection included): a uniform pick among this sample's options,
  ``p = 1 / number of options`` — the paper's Random row (0.199 / 0.162 / 0.183 / 0.172);
* open classification: a uniform pick among the dataset's label set in this task of the release (its
  distinct gold answers and the labels its closed options offer beside them — curated distractors
  included, "None of the above" not —, after normalisation), judged right only when it is the gold
  label, ``p = 1 / label-set size``: a dataset with one label is not a sure hit;
* open detection: one box with corners drawn uniformly in the image; ``p`` is the Monte Carlo
  probability (fixed seed, :data:`BOX_DRAWS` draws) that it reaches IoU ≥ 0.5 with a gold box.
"""
from __future__ import annotations

import hashlib
from functools import lru_cache

import numpy as np
import pandas as pd

from mmbu.benchmark_eval.parser import normalise_label_text
from mmbu.benchmark_eval.rundir import OPEN_ANSWER
from mmbu.benchmark_eval.scoring.metrics import IOU_THRESHOLD, iou_matrix

BOX_DRAWS = 512


def expected_f1(p: np.ndarray, n_gold: np.ndarray) -> float:
    """``2·Σp / (n + Σg)``: the exact expected micro-F1 of one random answer per record."""
    p = np.asarray(p, float)
    denominator = len(p) + float(np.sum(n_gold))
    return float(2 * p.sum() / denominator) if denominator else float("nan")


NONE_OF_THE_ABOVE = normalise_label_text("None of the above")  # the build's "none" option: no label


def open_label_odds(table: pd.DataFrame) -> dict[str, float]:
    """Per dataset: 1 / the number of distinct (normalised) labels of this task (a `load_gold` table): its open gold
    answers and the closed options beside them, "None of the above" aside."""
    texts: dict[str, set[str]] = {}
    for dataset, answer, options in zip(table["dataset_id"], table[OPEN_ANSWER], table["options"]):
        found = texts.setdefault(dataset, set())
        found.add(str(answer))
        if options is not None:
            found.update(map(str, options))
    odds = {}
    for dataset, found in texts.items():  # each distinct text normalised once, not once per row
        labels = {normalise_label_text(text) for text in found} - {NONE_OF_THE_ABOVE}
        if labels:
            odds[dataset] = 1.0 / len(labels)
    return odds


def random_box_hit_odds(gold: list, size: tuple[int, int], *, seed: int, key: str, draws: int = BOX_DRAWS) -> float:
    """Chance that a box with uniform random corners in a ``size`` image hits a gold box (IoU ≥ 0.5).

    Seeded by `seed` and the sample's `key`, so a sample's odds are the same in every run
    (and computed once: every model is asked the same sample).
    """
    return _random_box_hit_odds(tuple(tuple(float(v) for v in box) for box in gold), tuple(size), seed, key, draws)


@lru_cache(maxsize=1 << 17)
def _random_box_hit_odds(gold: tuple, size: tuple[int, int], seed: int, key: str, draws: int) -> float:
    if not gold:
        return 0.0
    digest = int.from_bytes(hashlib.sha256(key.encode("utf-8")).digest()[:8], "little")
    rng = np.random.default_rng([seed, digest])
    width, height = size
    xs = np.sort(rng.uniform(0, width, size=(draws, 2)), axis=1)
    ys = np.sort(rng.uniform(0, height, size=(draws, 2)), axis=1)
    boxes = np.column_stack([xs[:, 0], ys[:, 0], xs[:, 1], ys[:, 1]])
    return float((iou_matrix(boxes, gold).max(axis=1) >= IOU_THRESHOLD).mean())
