"""Closed-form options: gold label + distractors from the dataset's label set (then the manifest's curated
`questions.distractors` when it has too few); detection's boxes are placed by `box_options`.

Every random choice uses a generator seeded from (build seed, sample id), so a rebuild gives the
same options in the same order no matter how samples are ordered or parallelised.
"""
from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence
from dataclasses import dataclass


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
