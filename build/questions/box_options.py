"""Closed detection options with exactly one right answer: one instance of the target and wrong boxes that hold none.

The answer is the target's largest instance that the image's edge does not cut. A wrong box (a *distractor*) must

* hold no instance: no instance's centre inside it, and no more than `MAX_INSTANCE_SHARE` of any instance's box
  under it. A box shifted until its IoU with the answer fell under 0.5 still showed most of a nucleus, and of a
  second one beside it: several options were right;
* lie on the image's content (`MIN_ON_CONTENT` of it, by `content.content_mask`): a box in the air beside a body or
  on the black frame of an endoscopy image is rejected from anatomy alone;
* have the answer's size, so that size tells nothing;
* stand apart from every other option: no overlap, and centres at least `MIN_CENTRE_GAP` of the image's shorter
  side apart (or the box's longer side, if more), so that a reader can tell the options apart on the image.

Candidates are first boxes of the answer's size centred on the image's other objects (other classes: a red blood
cell when the target is a parasite), then positions on a grid over the image, each list in an order drawn from the
row's generator: the same seed and sample give the same options on every rebuild.
"""
from __future__ import annotations

import math
import random
from collections.abc import Sequence

import numpy as np

from mmbu.build.questions.content import ContentMask
from mmbu.core.boxes import PixelBox, box_text

# A box's corners hold none of a round object (an ellipse fills pi/4 of its box): a strip of up to a tenth of an
# instance's box along one side shows at most ~5 % of the object itself, a sliver no reader takes for the object,
# while forbidding every touch of a box would leave no room for wrong boxes in a crowded field of nuclei.
MAX_INSTANCE_SHARE = 0.1
MIN_ON_CONTENT = 1.0  # every cell of the content mask under the box: its rim already reaches a pixel or two past the
# picture's edge (the working copy is averaged down and smoothed), so a box on the body's edge still counts
MIN_CENTRE_GAP = 0.1
MAX_GRID_POSITIONS = 4096


def answer_box(gold_boxes: Sequence[Sequence[float]], size: tuple[int, int]) -> PixelBox:
    """The instance the closed question's right option shows: the largest of those the image's edge does not cut
    (an instance cut by the edge shows only part of itself), else the largest; the first of equals."""
    boxes = [tuple(int(round(v)) for v in box) for box in gold_boxes]
    whole = [b for b in boxes if b[0] > 0 and b[1] > 0 and b[2] < size[0] and b[3] < size[1]]
    return max(whole or boxes, key=lambda b: (b[2] - b[0]) * (b[3] - b[1]))


def _instance_clash(candidates: np.ndarray, gold: np.ndarray) -> np.ndarray:
    """For each candidate (N x 4): whether it holds an instance's centre or covers more than MAX_INSTANCE_SHARE of
    an instance's box (gold: M x 4)."""
    cx, cy = (gold[:, 0] + gold[:, 2]) / 2, (gold[:, 1] + gold[:, 3]) / 2
    c = candidates[:, None, :]
    centre = (c[..., 0] <= cx) & (cx < c[..., 2]) & (c[..., 1] <= cy) & (cy < c[..., 3])
    width = np.clip(np.minimum(c[..., 2], gold[:, 2]) - np.maximum(c[..., 0], gold[:, 0]), 0, None)
    height = np.clip(np.minimum(c[..., 3], gold[:, 3]) - np.maximum(c[..., 1], gold[:, 1]), 0, None)
    area = np.maximum((gold[:, 2] - gold[:, 0]) * (gold[:, 3] - gold[:, 1]), 1)
    return (centre | (width * height > MAX_INSTANCE_SHARE * area)).any(axis=1)


def min_centre_gap(size: tuple[int, int], box: Sequence[float]) -> float:
    """How far apart two options' centres must be: MIN_CENTRE_GAP of the shorter side, or the box's longer side."""
    return max(MIN_CENTRE_GAP * min(size), box[2] - box[0], box[3] - box[1])


def _apart(a: Sequence[float], b: Sequence[float], gap: float) -> bool:
    overlap = min(a[2], b[2]) > max(a[0], b[0]) and min(a[3], b[3]) > max(a[1], b[1])
    distance = math.hypot((a[0] + a[2] - b[0] - b[2]) / 2, (a[1] + a[3] - b[1] - b[3]) / 2)
    return not overlap and distance >= gap


def _candidates(answer: PixelBox, other_boxes: Sequence[Sequence[float]], size: tuple[int, int],
                rng: random.Random) -> np.ndarray:
    """Boxes of the answer's size inside the image: centred on other objects, then on a grid, each list shuffled."""
    width, height = size
    bw, bh = answer[2] - answer[0], answer[3] - answer[1]
    room_x, room_y = width - bw, height - bh
    centred = []
    for box in other_boxes:
        x = min(max(round((box[0] + box[2] - bw) / 2), 0), room_x)
        y = min(max(round((box[1] + box[3] - bh) / 2), 0), room_y)
        centred.append((x, y, x + bw, y + bh))
    centred = sorted(set(centred))
    rng.shuffle(centred)
    step = max(1, math.ceil(math.sqrt((room_x + 1) * (room_y + 1) / MAX_GRID_POSITIONS)))
    xs, ys = np.arange(0, room_x + 1, step), np.arange(0, room_y + 1, step)
    grid = np.stack(np.meshgrid(xs, ys), axis=-1).reshape(-1, 2)
    order = list(range(len(grid)))
    rng.shuffle(order)
    grid = grid[order]
    placed = np.concatenate([grid, grid + (bw, bh)], axis=1)
    return np.concatenate([np.asarray(centred, float).reshape(-1, 4), placed.astype(float)])


def box_options(gold_boxes: Sequence[Sequence[float]], other_boxes: Sequence[Sequence[float]],
                size: tuple[int, int], n_boxes: int, content: ContentMask,
                rng: random.Random) -> tuple[list[PixelBox], PixelBox] | None:
    """`n_boxes` boxes, the answer among them, in the order drawn (the caller shuffles the options), and the answer;
    None when too few wrong boxes fit (see the module's description)."""
    answer = answer_box(gold_boxes, size)
    if answer[2] - answer[0] > size[0] or answer[3] - answer[1] > size[1]:
        return None
    candidates = _candidates(answer, other_boxes, size, rng)
    gold = np.asarray(gold_boxes, float).reshape(-1, 4)
    usable = (content.shares(candidates) >= MIN_ON_CONTENT) & ~_instance_clash(candidates, gold)
    gap = min_centre_gap(size, answer)
    chosen: list[PixelBox] = [answer]
    for candidate in candidates[usable]:
        if len(chosen) == n_boxes:
            break
        box = tuple(int(v) for v in candidate)
        if all(_apart(box, other, gap) for other in chosen):
            chosen.append(box)
    return (chosen, answer) if len(chosen) == n_boxes else None


def box_option_problems(options: Sequence[str], answer: str, gold_boxes: Sequence[Sequence[float]],
                        size: tuple[int, int], content: ContentMask) -> list[str]:
    """What breaks the rules above in a released closed detection row (its options as texts), one sentence each;
    empty when the row obeys them. Checked box by box, apart from the vectorised search that placed them."""
    boxes = [tuple(int(v) for v in o.strip("[]").split(",")) for o in options if o.startswith("[")]
    problems = [] if answer in options else [f"the answer {answer} is not among the options"]
    target = tuple(int(v) for v in answer.strip("[]").split(","))
    gap = min_centre_gap(size, target)
    for box in boxes:
        if not (0 <= box[0] < box[2] <= size[0] and 0 <= box[1] < box[3] <= size[1]):
            problems.append(f"{box_text(box)} leaves the {size[0]} x {size[1]} image")
        if (box[2] - box[0], box[3] - box[1]) != (target[2] - target[0], target[3] - target[1]):
            problems.append(f"{box_text(box)} is not the answer's size")
        for other in boxes:
            if other < box and not _apart(box, other, gap):
                problems.append(f"{box_text(box)} and {box_text(other)} overlap or lie closer than {gap:.0f} px")
        if box == target:
            continue
        if content.shares(np.asarray([box], float))[0] < MIN_ON_CONTENT:
            problems.append(f"{box_text(box)} lies off the image's content")
        for instance in gold_boxes:
            cx, cy = (instance[0] + instance[2]) / 2, (instance[1] + instance[3]) / 2
            covered = max(0, min(box[2], instance[2]) - max(box[0], instance[0])) * \
                max(0, min(box[3], instance[3]) - max(box[1], instance[1]))
            area = max((instance[2] - instance[0]) * (instance[3] - instance[1]), 1)
            if box[0] <= cx < box[2] and box[1] <= cy < box[3] or covered > MAX_INSTANCE_SHARE * area:
                problems.append(f"{box_text(box)} holds the instance {box_text(instance)}")
    return problems
