"""What every layout model shares: strict fields, and the two questions the validator asks of a layout."""
from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from mmbu.core.confinement import stays_inside

# metadata field -> column of a label table holding a per-sample value for it
MetadataColumns = dict[str, str]

DatasetPath = Annotated[str, AfterValidator(stays_inside("the dataset's folder raw/<id>/"))]
"""A path, glob or path template relative to the dataset's folder `raw/<id>/` that cannot leave it
(absolute paths and `..` are refused here; the build checks again after resolving symbolic links)."""


CLASSIFY = frozenset({"ungrounded_classification"})
BOXES = frozenset({"box_grounded_classification", "object_detection"})
MASKS = frozenset({"mask_grounded_classification"})


class LayoutBase(BaseModel):
    """The base of every layout model: unknown fields are errors."""

    model_config = ConfigDict(extra="forbid")

    def feeds(self) -> frozenset[str]:
        """The tasks this layout can feed (the validator rejects a manifest asking for others)."""
        raise NotImplementedError

    def declared_labels(self) -> Iterator[tuple[str, str]]:
        """(field path, raw label) for every raw label written in the layout itself; each must be in `labels`."""
        return iter(())


class TableLabels(LayoutBase):
    """How a table row names its one raw label (shared by `label_table` and `volume_table`).

    Three ways: `label_column` (one value per row); `label_column` with `label_separator` (several
    labels joined in one cell, ChestX-ray14's `Finding Labels` `Effusion|Mass`); or `label_columns`,
    one column per label holding a positive or negative value (ISIC 2018's one-hot `MEL,NV,BCC,...`,
    where the column name is the raw label). A closed question has one right option, so a row with
    more than one positive label is excluded with that reason, and a row with none is excluded unless
    `no_finding` names the raw label it stands for.
    """

    label_column: str | None = Field(None, description="Column holding the raw label (or several, see label_separator).")
    label_columns: list[str] | None = Field(
        None, min_length=2, description="One-hot columns, one per raw label (the column name is the raw label).")
    label_separator: str | None = Field(
        None, min_length=1, description="Separator of several labels in label_column, e.g. '|'.")
    positive_values: list[str] = Field(["1", "1.0", "true", "True", "TRUE"],
                                       description="Cell values of a one-hot column that mean 'this label'.")
    negative_values: list[str] = Field(["0", "0.0", "false", "False", "FALSE", ""],
                                       description="Cell values that mean 'not this label'; anything else (e.g. "
                                                   "CheXpert's -1.0, uncertain) excludes the row.")
    no_finding: str | None = Field(
        None, description="Raw label for a row with no positive label (a one-hot row of negatives, an empty cell); "
                          "without it such rows are excluded. Must be in `labels`.")

    @model_validator(mode="after")
    def _one_way_to_the_label(self) -> "TableLabels":
        if (self.label_column is None) == (self.label_columns is None):
            raise ValueError("give exactly one of label_column (one column) and label_columns (one-hot columns)")
        if self.label_separator and self.label_column is None:
            raise ValueError("label_separator splits label_column; one-hot label_columns need none")
        if set(self.positive_values) & set(self.negative_values):
            raise ValueError(f"a value cannot be both positive and negative: "
                             f"{sorted(set(self.positive_values) & set(self.negative_values))}")
        return self

    def feeds(self) -> frozenset[str]:
        return CLASSIFY

    def declared_labels(self) -> Iterator[tuple[str, str]]:
        for index, column in enumerate(self.label_columns or []):
            yield f"layout.label_columns.{index}", column
        if self.no_finding:
            yield "layout.no_finding", self.no_finding
