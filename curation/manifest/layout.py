"""How to find images, labels, boxes and masks inside a fetched dataset (consumed by mmbu.build.layouts).

Paths and globs are relative to `$MMBU_DATA/raw/<id>/` after extraction. Globs use pathlib's syntax
(`**` recurses). Raw labels found by a layout are looked up in the manifest's `labels`; anything
else becomes an exclusion record, never an error that stops the dataset.
"""
from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

# metadata field -> column of a label table holding a per-sample value for it
MetadataColumns = dict[str, str]


class _Layout(BaseModel):
    model_config = ConfigDict(extra="forbid")


class FolderPerClassLayout(_Layout):
    """<root>/<label>/<file>: the name of the folder directly under `root` is the raw label."""

    kind: Literal["folder_per_class"]
    root: str = "."
    images: str = Field("*", description="Glob for image files inside each class folder (`**/*.png` recurses).")


class LabelTableLayout(_Layout):
    """A CSV/TSV table with one row per image; extra columns may carry per-sample metadata."""

    kind: Literal["label_table"]
    table: str
    image_column: str
    label_column: str
    image_root: str = "."
    delimiter: str | None = Field(None, description="Sniffed from the file (comma or tab) when omitted.")
    image_suffix: str = Field("", description="Appended to the image column's value, e.g. '.jpg' for bare ids.")
    metadata_columns: MetadataColumns = Field(
        default_factory=dict, description="Metadata field -> table column with a per-sample value (e.g. institution)."
    )


class CocoLayout(_Layout):
    """COCO detection JSON: `images`, `annotations` (bbox = [x, y, width, height]) and `categories`."""

    kind: Literal["coco"]
    annotations: str
    image_root: str = "."


class YoloLayout(_Layout):
    """YOLO txt: one `<class> <cx> <cy> <w> <h>` line per object, normalised to the image size.

    A label file is paired with the image of the same relative stem under `images`' folder.
    """

    kind: Literal["yolo"]
    images: str = Field(description="Glob for the image files.")
    labels: str = Field(description="Folder holding the .txt files (mirrors the image folder tree).")
    class_names: list[str] | None = Field(None, description="Class index -> raw label; the index itself when omitted.")


class VocLayout(_Layout):
    """Pascal VOC XML files (`<filename>`, `<size>`, `<object><name><bndbox>`)."""

    kind: Literal["voc"]
    annotations: str = Field(description="Glob for the XML files.")
    image_root: str = "."


class ImageMaskPairsLayout(_Layout):
    """Image files with same-stem mask files (PNG, TIFF or NIfTI label volumes).

    `mask_values` maps a mask value to a raw label; `background` is ignored. `instances` says how
    objects are separated: `none` (one region per value), `components` (connected components of each
    value are separate objects) or `ids` (every value is one object of class `instance_label`).
    """

    kind: Literal["image_mask_pairs"]
    images: str
    masks: str
    mask_suffix: str = Field("", description="Removed from a mask's stem before pairing, e.g. '_mask'.")
    mask_values: dict[int, str] = Field(default_factory=dict)
    background: int = 0
    instances: Literal["none", "components", "ids"] = "none"
    instance_label: str | None = Field(None, description="Raw label of every object when instances is 'ids'.")
    min_region_pixels: int = Field(1, ge=1, description="Regions smaller than this are dropped as specks.")

    @field_validator("instances", mode="before")
    @classmethod
    def _accept_bool(cls, value: object) -> object:
        # Earlier manifests wrote `instances: true` for connected components.
        if isinstance(value, bool):
            return "components" if value else "none"
        return value

    @model_validator(mode="after")
    def _ids_need_a_label(self) -> "ImageMaskPairsLayout":
        if self.instances == "ids" and not self.instance_label:
            raise ValueError("instances: ids needs instance_label (the raw label of every object)")
        return self


Layout = Annotated[
    FolderPerClassLayout | LabelTableLayout | CocoLayout | YoloLayout | VocLayout | ImageMaskPairsLayout,
    Field(discriminator="kind"),
]
