"""From samples to task items: one per question the release will ask (`rows.TaskItem`).

    ungrounded_classification     one item per image with an image-level label
    box_grounded_classification   one item per object with a box ("the region outlined in the box")
    mask_grounded_classification  one item per mask region ("the outlined region")
    object_detection              one item per (image, class present): every box of that class

Each item gets its own stable `sample_id` (dataset + source path + frame + task-qualified instance) and holds its
image's `Sample` (whose id keys the image's metadata row) and, when grounded, its `Region`. Boxes are in the
*source* frame here: `place_items` carries them onto the converted PNG. Regions without a box (volumes before
their slice is chosen) are skipped: rebuild the sample's regions from the converted mask with `regions_from_mask`
first.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

import pandas as pd

from mmbu.build.layouts.sample import Sample, make_sample_id
from mmbu.build.questions.rows import METADATA_VALUES, Metadata, TaskItem
from mmbu.core.exclusions import Exclusion
from mmbu.core.release import Task
from mmbu.curation.manifest import DatasetManifest


def task_items(samples: Iterable[Sample], manifest: DatasetManifest) -> list[TaskItem]:
    """Every task item the manifest's `tasks` ask for, a sample's items together."""
    items: list[TaskItem] = []
    tasks = set(manifest.tasks)
    for sample in samples:
        def qualified(kind: str, key: str, sample: Sample = sample) -> str:
            # the kind keeps a box row and a mask row about the same region apart
            return make_sample_id(sample.dataset_id, sample.source_path, sample.part, f"{kind}:{key}")

        if Task.UNGROUNDED in tasks and sample.label is not None:
            items.append(TaskItem(sample, Task.UNGROUNDED, sample.sample_id, sample.label))
        boxed = [r for r in sample.regions if r.box is not None]
        for region in boxed:
            if Task.BOX_GROUNDED in tasks:
                items.append(TaskItem(sample, Task.BOX_GROUNDED, qualified("box", region.instance), region.label,
                                      region, boxes=(region.box,)))
            if Task.MASK_GROUNDED in tasks and region.mask_value is not None:
                items.append(TaskItem(sample, Task.MASK_GROUNDED, qualified("mask", region.instance), region.label,
                                      region, boxes=(region.box,)))
        if Task.DETECTION in tasks:
            for target in sorted({r.label for r in boxed}):
                items.append(TaskItem(sample, Task.DETECTION, qualified("detect", target), target,
                                      boxes=tuple(r.box for r in boxed if r.label == target),
                                      other_boxes=tuple(r.box for r in boxed if r.label != target)))
    return items


def image_metadata(metadata: pd.DataFrame) -> dict[str, Metadata]:
    """The validated metadata table's rows keyed by image sample id (`METADATA_VALUES`, None where missing)."""
    columns = [[None if pd.isna(value) else value for value in metadata[name].tolist()] for name in METADATA_VALUES]
    return {sample_id: dict(zip(METADATA_VALUES, values))
            for sample_id, *values in zip(metadata["sample_id"].tolist(), *columns)}


def attach_metadata(items: Iterable[TaskItem], metadata: pd.DataFrame) -> tuple[list[TaskItem], list[Exclusion]]:
    """The items with their image's validated metadata; items of images whose metadata did not validate are
    dropped."""
    by_image = image_metadata(metadata)
    kept: list[TaskItem] = []
    exclusions: list[Exclusion] = []
    for item in items:
        found = by_image.get(item.sample.sample_id)
        if found is None:
            exclusions.append(Exclusion(dataset_id=item.sample.dataset_id, sample_id=item.sample_id,
                                        item=item.source_path, stage="metadata",
                                        reason="the image's metadata did not pass validation"))
        else:
            kept.append(replace(item, metadata=found))
    return kept, exclusions
