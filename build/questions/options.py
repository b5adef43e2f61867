"""Closed-form options: gold label + distractors from the dataset's label set (then the manifest's curated
`questions.distractors` when it has too few), or candidate boxes.

Every random choice uses a generator seeded from (build seed, sample id), so a rebuild gives the
same options in the same order no matter how samples are ordered or parallelised.
"""
from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence
from dataclasses import dataclass

from mmbu.core.boxes import PixelBox, box_text, iou


def rng_for(sample_id: str, seed: int, purpose: str = "options") -> random.Random:
    """A generator that depends only on the build seed, the row's id and what it is used for."""
    digest = hashlib.sha256(f"{seed}\x1f{purpose}\x1f{sample_id}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


@dataclass(frozen=True)
class OptionPlan:
    """How many options a dataset's closed questions have; fixed for the whole dataset."""

    label_slots: int  # options that are labels (gold + distractors)
    none_of_the_above: bool

    @property
    def n_options(self) -> int:
        return self.label_slots + int(self.none_of_the_above)


def plan_options(n_labels: int, n_options: int, none_of_the_above: bool) -> OptionPlan | None:
    """The dataset's option plan; fewer labels than slots shrink it for every row alike. None if impossible."""
    slots = min(n_options - int(none_of_the_above), n_labels)
    if slots < 1 or slots + int(none_of_the_above) < 2:
        return None
    return OptionPlan(label_slots=slots, none_of_the_above=none_of_the_above)


def label_options(gold: str, label_set: Sequence[str], plan: OptionPlan, rng: random.Random,
                  none_text: str, leave_out_gold: bool = False,
                  distractors: Sequence[str] = ()) -> tuple[list[str], str]:
    """(options in presentation order, answer). With `leave_out_gold`, "None of the above" is the answer.

    Wrong options are the dataset's other labels; when they are too few, the rest are drawn from `distractors` (the
    manifest's curated ones). A dataset with enough labels draws exactly as before distractors existed.
    """
    others = [label for label in label_set if label != gold]
    wanted = plan.label_slots if leave_out_gold else plan.label_slots - 1
    chosen = rng.sample(others, min(wanted, len(others)))
    if len(chosen) < wanted:
        chosen += rng.sample(list(distractors), wanted - len(chosen))
    options = ([] if leave_out_gold else [gold]) + chosen + ([none_text] if plan.none_of_the_above else [])
    rng.shuffle(options)
    return options, none_text if leave_out_gold else gold


def _shifted_box(box: PixelBox, size: tuple[int, int], rng: random.Random) -> PixelBox:
    """The answer box moved (and slightly rescaled) to a random place inside the image."""
    width, height = size
    bw, bh = box[2] - box[0], box[3] - box[1]
    scale = rng.uniform(0.75, 1.33)
    nw, nh = max(1, min(width, round(bw * scale))), max(1, min(height, round(bh * scale)))
    x1, y1 = rng.randint(0, width - nw), rng.randint(0, height - nh)
    return (x1, y1, x1 + nw, y1 + nh)


def box_options(gold_boxes: Sequence[PixelBox], other_boxes: Sequence[PixelBox], size: tuple[int, int],
                plan: OptionPlan, rng: random.Random, none_text: str, max_overlap: float = 0.5,
                attempts: int = 200) -> tuple[list[str], str] | None:
    """Candidate boxes for closed detection: the answer box plus distractors, or None if too few exist.

    The answer is the largest gold box. Distractors are first other objects' boxes, then copies of
    the answer box moved elsewhere; every distractor overlaps every gold box and every other option
    with IoU < `max_overlap`, so exactly one option is right.
    """
    answer = max(gold_boxes, key=lambda b: (b[2] - b[0]) * (b[3] - b[1]))
    chosen: list[PixelBox] = [answer]

    def acceptable(candidate: PixelBox) -> bool:
        return all(iou(candidate, g) < max_overlap for g in gold_boxes) and \
            all(iou(candidate, c) < max_overlap for c in chosen)

    pool = [tuple(int(v) for v in b) for b in other_boxes]
    rng.shuffle(pool)
    for candidate in pool:
        if len(chosen) == plan.label_slots:
            break
        if acceptable(candidate):
            chosen.append(candidate)
    for _ in range(attempts):
        if len(chosen) == plan.label_slots:
            break
        candidate = _shifted_box(answer, size, rng)
        if acceptable(candidate):
            chosen.append(candidate)
    if len(chosen) < plan.label_slots:
        return None
    options = [box_text(b) for b in chosen] + ([none_text] if plan.none_of_the_above else [])
    rng.shuffle(options)
    return options, box_text(answer)
