"""Typed rows for the question tests, made by hand (synthetic: no layout read them, no converter placed them)."""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from mmbu.build.layouts.sample import Sample
from mmbu.build.questions import PlacedItem, TaskItem
from mmbu.build.questions.rows import METADATA_VALUES
from mmbu.core.release import Task


def placed_item(dataset_id: str, label: str, *, sample_id: str = "demo_marrow-0000000000000001",
                task: str = Task.UNGROUNDED, source_path: str = "a.png", image: str | Path | None = None,
                size: tuple[int, int] = (64, 64), boxes: Sequence[Sequence[float]] | None = None,
                other_boxes: Sequence[Sequence[float]] | None = None, **metadata: str | None) -> PlacedItem:
    """One item of `task` about `label` (raw), on `image` (default: `source_path`) of `size`, with `metadata`
    (the fields not given are missing). Detection items take `boxes` (the target's) and `other_boxes`."""
    unknown = set(metadata) - set(METADATA_VALUES)
    assert not unknown, f"not metadata: {unknown}"
    sample = Sample(sample_id=sample_id, dataset_id=dataset_id, source_path=source_path, image_path=Path(source_path),
                    image_size=size)
    as_boxes = (lambda found: None if found is None else tuple(tuple(box) for box in found))
    item = TaskItem(sample, Task(task), sample_id, label, boxes=as_boxes(boxes), other_boxes=as_boxes(other_boxes),
                    metadata={name: metadata.get(name) for name in METADATA_VALUES})
    return PlacedItem(item, Path(image) if image is not None else Path(source_path), size, item.boxes,
                      item.other_boxes)


def on_image(items: Iterable[TaskItem], image: str | Path, size: tuple[int, int]) -> list[PlacedItem]:
    """Items put on one image as they are, their boxes not moved (the image has the samples' size)."""
    return [PlacedItem(item, Path(image), size, item.boxes, item.other_boxes) for item in items]


def as_placed(items: Iterable[TaskItem]) -> list[PlacedItem]:
    """Items on their samples' own images, boxes not moved: enough for classification, which reads no pixels."""
    return [PlacedItem(item, item.sample.image_path, tuple(item.sample.image_size or (1, 1)), item.boxes,
                       item.other_boxes) for item in items]
