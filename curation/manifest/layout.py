"""How to find images, labels, boxes and masks inside a fetched dataset (consumed by mmbu.build.layouts).

Paths and globs are relative to `$MMBU_DATA/raw/<id>/` after extraction.
"""
from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field


class _Layout(BaseModel):
    model_config = ConfigDict(extra="forbid")


class FolderPerClassLayout(_Layout):
    """images/<label>/<file>: the folder name is the raw label."""

    kind: Literal["folder_per_class"]
    root: str = "."
    images: str = Field("*", description="Glob for image files inside each class folder.")


class LabelTableLayout(_Layout):
    """A CSV/TSV table with one row per image."""

    kind: Literal["label_table"]
    table: str
    image_column: str
    label_column: str
    image_root: str = "."
    delimiter: str | None = None


class CocoLayout(_Layout):
    kind: Literal["coco"]
    annotations: str
    image_root: str = "."


class YoloLayout(_Layout):
    kind: Literal["yolo"]
    images: str
    labels: str
    class_names: list[str] | None = None


class VocLayout(_Layout):
    kind: Literal["voc"]
    annotations: str
    image_root: str = "."


class ImageMaskPairsLayout(_Layout):
    """Image files with same-stem mask files; mask values map to raw labels via `mask_values`."""

    kind: Literal["image_mask_pairs"]
    images: str
    masks: str
    mask_values: dict[int, str] = Field(default_factory=dict)
    instances: bool = False


Layout = Annotated[
    FolderPerClassLayout | LabelTableLayout | CocoLayout | YoloLayout | VocLayout | ImageMaskPairsLayout,
    Field(discriminator="kind"),
]
