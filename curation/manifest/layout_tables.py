"""Layouts whose samples are rows of a table with the image inside it: Parquet files (`parquet`), as
Hugging Face dataset repositories ship them."""
from __future__ import annotations

from collections.abc import Iterator
from typing import Literal

from pydantic import Field, field_validator, model_validator

from mmbu.curation.manifest.layout_base import BOXES, CLASSIFY, DatasetPath, MASKS, MetadataColumns, RowFilter
from mmbu.curation.manifest.templates import parse_template


class ParquetLayout(RowFilter):
    """Parquet (or Arrow IPC) tables with the image embedded in a column, one sample per row.

    The image column holds a Hugging Face `Image` struct `{bytes, path}` or raw encoded bytes; the
    bytes are stored as they are in the layout cache (no re-encoding). `image_encoding: base64` reads
    text cells holding the encoded image in base64 (SurgWound's `image` column); `path` reads cells (text,
    or a struct's `path`) naming an image file of the dataset relative to `image_root`, and that file is
    the sample. `where` keeps only the rows whose columns hold given values (SurgWound has one row per
    image and attribute: `where: {field: [Healing Status]}` asks about one attribute). `label_column` holds a class
    index (its name from `class_names`, else from the `ClassLabel` names of the repository card's
    `dataset_info.features` in `card`, else from the Hugging Face features stored in the file), a
    text label, or a list of labels (one right option: see `label_table`). `mask_column` holds a
    label-mask image (read with `mask_values`/`instances` as in `image_mask_pairs`); `objects_column`
    holds detection objects as `datasets` writes them (`{bbox: [[...], ...], category: [...]}`).
    `files` is a template: `data/{split}-*.parquet` reads `data/train-00000-of-00005-<hash>.parquet`
    with split `train`, filtered by `splits`. Arrow IPC files are read the same way (told by their first
    bytes): `{split}/data-*.arrow` reads a `datasets` `save_to_disk` folder (IPC stream format, the
    features stored in the schema), and IPC files (Feather v2) too.
    """

    kind: Literal["parquet"]
    files: DatasetPath = Field(description="Template of the Parquet or Arrow IPC files, e.g. 'data/{split}-*.parquet', "
                                           "'{split}/data-*.arrow'.")
    image_column: str = "image"
    image_encoding: Literal["auto", "base64", "path"] = Field(
        "auto", description="auto: a {bytes, path} struct or raw bytes (a struct with only a path names a file under "
                            "image_root); base64: text holding the encoded image; path: text naming an image file "
                            "under image_root.")
    image_root: DatasetPath = Field(".", description="Folder the image paths in the table are relative to.")
    label_column: str | None = None
    class_names: list[str] | None = Field(None, description="Class index -> raw label; read from `card` when omitted.")
    card: DatasetPath | None = Field("README.md", description="Dataset card whose YAML `dataset_info.features` names the "
                                                      "ClassLabel values.")
    config_name: str | None = Field(None, description="Which `dataset_info` entry of a card with several configs.")
    no_finding: str | None = None
    mask_column: str | None = None
    mask_values: dict[int, str] = Field(default_factory=dict)
    instances: Literal["none", "components", "ids"] = "none"
    instance_label: str | None = None
    background: int = 0
    objects_column: str | None = None
    box_field: str = "bbox"
    category_field: str = "category"
    object_class_names: list[str] | None = Field(None, description="Category index -> raw label; read from `card` "
                                                                   "when omitted.")
    box_format: Literal["xywh", "xyxy", "cxcywh"] = Field("xywh", description="COCO's [x, y, width, height] "
                                                                              "is what `datasets` examples use.")
    box_units: Literal["pixels", "fractions"] = "pixels"
    min_region_pixels: int = Field(1, ge=1)
    metadata_columns: MetadataColumns = Field(default_factory=dict)
    splits: list[str] | None = Field(None, min_length=1)

    @field_validator("files")
    @classmethod
    def _template(cls, value: str) -> str:
        parse_template(value)
        return value

    @model_validator(mode="after")
    def _something_to_ask(self) -> "ParquetLayout":
        if not (self.label_column or self.mask_column or self.objects_column):
            raise ValueError("parquet needs label_column, mask_column or objects_column")
        if self.splits and "split" not in parse_template(self.files).names:
            raise ValueError(f"splits filters the {{split}} part of files, and {self.files!r} has none")
        if self.mask_column and not (self.mask_values or self.instance_label):
            raise ValueError("mask_column needs mask_values (value -> raw label) or instance_label")
        return self

    def feeds(self) -> frozenset[str]:
        tasks = CLASSIFY if self.label_column else frozenset()
        if self.mask_column:
            tasks |= MASKS | (BOXES if self.instances != "none" else frozenset())
        if self.objects_column:
            tasks |= BOXES
        return tasks

    def declared_labels(self) -> Iterator[tuple[str, str]]:
        for field in ("class_names", "object_class_names"):
            for index, raw in enumerate(getattr(self, field) or []):
                yield f"layout.{field}.{index}", raw
        for value, raw in self.mask_values.items():
            yield f"layout.mask_values.{value}", raw
        for name in ("instance_label", "no_finding"):
            if getattr(self, name):
                yield f"layout.{name}", getattr(self, name)
