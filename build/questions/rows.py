"""The rows step's typed rows, one type per stage, and their one conversion to a table, at the writer.

    TaskItem     `task_items`: one question to ask about one sample, its boxes in the sample's stored frame;
                 `attach_metadata` gives it its image's validated metadata
    PlacedItem   `place_items`: the item on its converted PNG (boxes in PNG pixels, the ROI mask written)
    QuestionRow  `instantiate_questions`: the three template questions, the closed options, answer and aliases

`rows_frame(rows)` makes the table `rows.parquet` holds (columns `ROW_COLUMNS`) from the question rows, once, when
the step writes them (`mmbu.build.sorted_runs.SortedRuns.add`).
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from mmbu.build.layouts.sample import Region, Sample
from mmbu.build.schemas import METADATA_COLUMNS
from mmbu.core.boxes import Box
from mmbu.core.release import CLOSED_QUESTION_COLUMNS, QUESTION_COLUMNS, Task

ITEM_COLUMNS = ("sample_id", "image_sample_id", "dataset_id", "task", "source_path", "image_path", "mask_path",
                "label", "target", "boxes", "other_boxes", "mask_value", "component", "region_instance")
"""What a task item says about itself in `rows.parquet`."""
METADATA_VALUES = tuple(name for name in METADATA_COLUMNS if name not in ("sample_id", "dataset_id"))
"""The metadata an item takes from its image's validated row: the 13 fields, the licence and the slide extras."""
PLACED_COLUMNS = ("image", "image_width", "image_height", "mask")
QUESTION_ROW_COLUMNS = ("answer", "options", *QUESTION_COLUMNS.values(), "label", "target", "answer_aliases",
                        "question_version", *CLOSED_QUESTION_COLUMNS.values())
"""What instantiating a row adds (`label` and `target` become the display names)."""
ROW_COLUMNS = tuple(dict.fromkeys([*ITEM_COLUMNS, *METADATA_VALUES, *PLACED_COLUMNS, *QUESTION_ROW_COLUMNS]))
"""The columns of `rows.parquet`, in order."""

Metadata = Mapping[str, str | float | None]
"""An image's validated metadata, keyed by `METADATA_VALUES`: text, the slide's floats, None where missing."""


@dataclass(frozen=True)
class TaskItem:
    """One question the release will ask about one sample (`task_items`).

    `label` is the raw label asked about (for detection, the target class). A grounded item holds its `region`;
    `boxes` are the region's box (grounded) or every box of the target (detection), `other_boxes` the boxes of the
    image's other classes (detection only), all in the sample's stored frame. `metadata` is None until
    `attach_metadata` gives the item its image's row.
    """

    sample: Sample
    task: Task
    sample_id: str
    label: str
    region: Region | None = None
    boxes: tuple[Box, ...] | None = None
    other_boxes: tuple[Box, ...] | None = None
    metadata: Metadata | None = None

    @property
    def target(self) -> str | None:
        """The raw class a detection item asks to locate (None for classification)."""
        return self.label if self.task == Task.DETECTION else None

    @property
    def source_path(self) -> str:
        return self.sample.source_path

    def metadata_value(self, name: str) -> str | None:
        """A metadata text (None when missing or not attached)."""
        value = (self.metadata or {}).get(name)
        return value if isinstance(value, str) else None


@dataclass(frozen=True)
class PlacedItem:
    """A task item on its converted PNG (`place_items`): the PNG's path and size, the boxes in its pixels and, for
    a mask-grounded item, the ROI mask PNG written for it."""

    item: TaskItem
    image: Path
    image_size: tuple[int, int]  # (width, height) of the PNG
    boxes: tuple[tuple[int, int, int, int], ...] | None = None
    other_boxes: tuple[tuple[int, int, int, int], ...] | None = None
    mask: Path | None = None

    @property
    def sample_id(self) -> str:
        return self.item.sample_id

    @property
    def task(self) -> Task:
        return self.item.task


@dataclass(frozen=True)
class QuestionRow:
    """One release row before its images are embedded (`instantiate_questions`): `label` and `target` are the
    display names; `questions` maps each question column (`QUESTION_COLUMNS`, `CLOSED_QUESTION_COLUMNS`) to its
    text, None where the closed form asks the template question."""

    placed: PlacedItem
    label: str
    target: str | None
    questions: Mapping[str, str | None]
    options: list[str]
    answer: str
    answer_aliases: list[str] = field(default_factory=list)
    question_version: str = ""

    @property
    def sample_id(self) -> str:
        return self.placed.item.sample_id

    @property
    def dataset_id(self) -> str:
        return self.placed.item.sample.dataset_id

    @property
    def task(self) -> Task:
        return self.placed.item.task

    def record(self) -> dict[str, object]:
        """The row as `rows.parquet` holds it, keyed by `ROW_COLUMNS`."""
        placed, item = self.placed, self.placed.item
        sample, region = item.sample, item.region
        metadata = item.metadata or {}
        values: dict[str, object] = {
            "sample_id": item.sample_id, "image_sample_id": sample.sample_id, "dataset_id": sample.dataset_id,
            "task": item.task.value, "source_path": sample.source_path, "image_path": str(sample.image_path),
            "mask_path": str(sample.mask_path) if sample.mask_path else None,
            "boxes": _lists(placed.boxes), "other_boxes": _lists(placed.other_boxes),
            "mask_value": region.mask_value if region else None, "component": region.component if region else None,
            "region_instance": region.instance if region else None,
            # a missing value as the validated table holds it (NaN), so that each column keeps that table's type
            **{name: _or_nan(metadata.get(name)) for name in METADATA_VALUES},
            "image": str(placed.image), "image_width": placed.image_size[0], "image_height": placed.image_size[1],
            "mask": str(placed.mask) if placed.mask else None,
            "answer": self.answer, "options": self.options, **self.questions, "label": self.label,
            "target": self.target, "answer_aliases": self.answer_aliases, "question_version": self.question_version,
        }
        return {name: values.get(name) for name in ROW_COLUMNS}


def rows_frame(rows: Iterable[QuestionRow]) -> pd.DataFrame:
    """The question rows as the table `rows.parquet` holds (columns `ROW_COLUMNS`)."""
    return pd.DataFrame([row.record() for row in rows], columns=list(ROW_COLUMNS))


def _lists(boxes: Sequence[Sequence[int]] | None) -> list[list[int]] | None:
    return None if boxes is None else [list(box) for box in boxes]


def _or_nan(value: str | float | None) -> str | float:
    return float("nan") if value is None else value
