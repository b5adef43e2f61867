"""From samples to task items: one row per question the release will ask.

    ungrounded_classification     one row per image with an image-level label
    box_grounded_classification   one row per object with a box ("the region outlined in the box")
    mask_grounded_classification  one row per mask region ("the outlined region")
    object_detection              one row per (image, class present): every box of that class

Each row gets its own stable `sample_id` (dataset + source path + frame + task-qualified instance);
`image_sample_id` links it to the image's metadata row. Boxes are in the *source* frame here: map
them with `mmbu.build.layouts.map_boxes` once the conversion report is known. Regions without a box
(volumes before their slice is chosen) are skipped: rebuild the sample's regions from the converted
mask with `regions_from_mask` first.
"""
from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

from mmbu.build.layouts.sample import Sample, make_sample_id
from mmbu.core.exclusions import Exclusion
from mmbu.curation.manifest import DatasetManifest

ITEM_COLUMNS = ("sample_id", "image_sample_id", "dataset_id", "task", "source_path", "image_path", "mask_path",
                "label", "target", "boxes", "other_boxes", "mask_value", "component", "region_instance")


def _row(sample: Sample, task: str, sample_id: str, **fields: object) -> dict[str, object]:
    base = {"sample_id": sample_id, "image_sample_id": sample.sample_id, "dataset_id": sample.dataset_id,
            "task": task, "source_path": sample.source_path, "image_path": str(sample.image_path),
            "mask_path": str(sample.mask_path) if sample.mask_path else None, "label": None, "target": None,
            "boxes": None, "other_boxes": None, "mask_value": None, "component": None, "region_instance": None}
    base.update(fields)
    return base


def task_items(samples: Iterable[Sample], manifest: DatasetManifest) -> pd.DataFrame:
    """Every task row the manifest's `tasks` ask for, columns `ITEM_COLUMNS`."""
    rows: list[dict[str, object]] = []
    tasks = set(manifest.tasks)
    for sample in samples:
        def qualified(kind: str, key: str, sample: Sample = sample) -> str:
            # the kind keeps a box row and a mask row about the same region apart
            return make_sample_id(sample.dataset_id, sample.source_path, sample.frame, f"{kind}:{key}")

        if "ungrounded_classification" in tasks and sample.label is not None:
            rows.append(_row(sample, "ungrounded_classification", sample.sample_id, label=sample.label))
        boxed = [r for r in sample.regions if r.box is not None]
        for region in boxed:
            common = {"label": region.label, "boxes": [list(region.box)], "region_instance": region.instance,
                      "mask_value": region.mask_value, "component": region.component}
            if "box_grounded_classification" in tasks:
                rows.append(_row(sample, "box_grounded_classification",
                                 qualified("box", region.instance), **common))
            if "mask_grounded_classification" in tasks and region.mask_value is not None:
                rows.append(_row(sample, "mask_grounded_classification",
                                 qualified("mask", region.instance), **common))
        if "object_detection" in tasks:
            for target in sorted({r.label for r in boxed}):
                rows.append(_row(sample, "object_detection", qualified("detect", target), target=target,
                                 label=target, boxes=[list(r.box) for r in boxed if r.label == target],
                                 other_boxes=[list(r.box) for r in boxed if r.label != target]))
    return pd.DataFrame(rows, columns=list(ITEM_COLUMNS))


def attach_metadata(items: pd.DataFrame, metadata: pd.DataFrame) -> tuple[pd.DataFrame, list[Exclusion]]:
    """Join validated metadata (keyed by image sample id) onto task items; items of invalid images are dropped."""
    meta = metadata.rename(columns={"sample_id": "image_sample_id"})
    meta = meta.drop(columns=[c for c in ("dataset_id",) if c in meta.columns])
    joined = items.merge(meta, on="image_sample_id", how="left", indicator=True)
    missing = joined["_merge"] == "left_only"
    exclusions = [Exclusion(dataset_id=row.dataset_id, sample_id=row.sample_id, item=row.source_path,
                            stage="metadata", reason="the image's metadata did not pass validation")
                  for row in joined[missing].itertuples()]
    return joined[~missing].drop(columns="_merge").reset_index(drop=True), exclusions
