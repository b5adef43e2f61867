"""What every layout model shares: strict fields, and the two questions the validator asks of a layout."""
from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator

from mmbu.core.boxes import box_shape_problem
from mmbu.core.confinement import stays_inside
from mmbu.core.release import Task

# metadata field -> column of a label table holding a per-sample value for it
MetadataColumns = dict[str, str]

DatasetPath = Annotated[str, AfterValidator(stays_inside("the dataset's folder raw/<id>/"))]
"""A path, glob or path template relative to the dataset's folder `raw/<id>/` that cannot leave it
(absolute paths and `..` are refused here; the build checks again after resolving symbolic links)."""



def _pins_a_box(order: tuple[str, ...]) -> tuple[str, ...]:
    if problem := box_shape_problem(order):
        raise ValueError(problem)
    return order


BoxOrder = Annotated[tuple[str, ...], AfterValidator(_pins_a_box)]
"""The roles (`mmbu.core.boxes.BOX_ROLES`) of a source's four box numbers in the order it writes them:
COCO's `[x1, y1, width, height]`, MIDOG's corner boxes `[x1, y1, x2, y2]`, a row/column source's `[y1, x1, y2, x2]`."""

CLASSIFY = frozenset({Task.UNGROUNDED})
BOXES = frozenset({Task.BOX_GROUNDED, Task.DETECTION})
MASKS = frozenset({Task.MASK_GROUNDED})


class LayoutBase(BaseModel):
    """The base of every layout model: unknown fields are errors."""

    model_config = ConfigDict(extra="forbid")

    def feeds(self) -> frozenset[str]:
        """The tasks this layout can feed (the validator rejects a manifest asking for others)."""
        raise NotImplementedError

    def declared_labels(self) -> Iterator[tuple[str, str]]:
        """(field path, raw label) for every raw label written in the layout itself; each must be in `labels`."""
        return iter(())


class RowFilter(LayoutBase):
    """Layouts whose rows (or objects) can be kept by the values of their fields: `where`.

    SurgWound's Parquet has one row per image and attribute (`where: {field: [Healing Status]}`); NuCLS's box
    tables mix hand-drawn rectangles with other shapes (`where: {type: [rectangle]}`). Values compare as text
    with surrounding spaces removed.
    """

    where: dict[str, list[str]] = Field(
        default_factory=dict, description="Field (column) -> values: only rows whose field holds one of them are read, "
                                          "e.g. {field: [Healing Status]}.")

    @field_validator("where")
    @classmethod
    def _values_to_keep(cls, value: dict[str, list[str]]) -> dict[str, list[str]]:
        if empty := [column for column, values in value.items() if not values]:
            raise ValueError(f"where lists no value for {', '.join(map(repr, empty))}; name the values to keep")
        return value

    def keeps(self, value_of: Callable[[str], Any]) -> bool:
        """True when every `where` field (its value read by `value_of`) holds one of the listed values."""
        return self.left_out_by(value_of) is None

    def left_out_by(self, value_of: Callable[[str], Any]) -> str | None:
        """Why `where` leaves the row out (the first field whose value is not listed), or None when it keeps it."""
        for field, values in self.where.items():
            value = value_of(field)
            text = "" if value is None else str(value).strip()
            if text not in values:
                return f"where keeps {field} in {values} and the row's {field} is {text!r}"
        return None

    def where_text(self) -> str:
        """The filter in words, for exclusions that name it: "type in ['rectangle']"."""
        return " and ".join(f"{field} in {values}" for field, values in self.where.items())


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


RGB = tuple[int, int, int]
_HEX = re.compile(r"^#([0-9a-fA-F]{6})$")
_TRIPLE = re.compile(r"^\s*(\d{1,3})\s*,\s*(\d{1,3})\s*,\s*(\d{1,3})\s*$")


def parse_colour(text: str) -> RGB:
    """'#00ff00' or '0,255,0' as an (r, g, b) triple; ValueError naming the text otherwise."""
    if found := _HEX.match(str(text)):
        number = int(found.group(1), 16)
        return (number >> 16) & 255, (number >> 8) & 255, number & 255
    if (found := _TRIPLE.match(str(text))) and all(int(part) <= 255 for part in found.groups()):
        return tuple(int(part) for part in found.groups())  # type: ignore[return-value]
    raise ValueError(f"{text!r} is not a colour; write '#rrggbb' or 'r,g,b' with each number 0-255 (e.g. '0,255,0')")


class ColourMasks(LayoutBase):
    """Mask layouts whose masks may be RGB images with one colour per class (`mask_colors`).

    BUS-UCLM's masks are PNGs with green benign and red malignant lesions on black. The layout turns
    each into a label mask (value i for the i-th colour) in its cache. A pixel of a colour the map does
    not name excludes the mask (`other_colors: exclude`), or counts as background (`other_colors:
    background`, e.g. for anti-aliased outlines); JPEG colour masks snap to the nearest declared colour.
    """

    mask_colors: dict[str, str] = Field(
        default_factory=dict, description="Colour ('#00ff00' or '0,255,0') -> raw label, for RGB masks whose colours "
                                          "are classes; replaces mask_values.")
    background_color: str = Field("#000000", description="Colour of unlabelled pixels in an RGB mask.")
    other_colors: Literal["exclude", "background"] = Field(
        "exclude", description="A pixel of a colour mask_colors does not name: the mask is excluded, or the pixel "
                               "is background (the count is recorded either way).")

    @field_validator("mask_colors")
    @classmethod
    def _colours(cls, value: dict[str, str]) -> dict[str, str]:
        seen: dict[RGB, str] = {}
        for text in value:
            colour = parse_colour(text)
            if colour in seen:
                raise ValueError(f"{text!r} and {seen[colour]!r} are the same colour")
            seen[colour] = text
        return value

    @field_validator("background_color")
    @classmethod
    def _background(cls, value: str) -> str:
        parse_colour(value)
        return value

    @model_validator(mode="after")
    def _colours_replace_values(self) -> "ColourMasks":
        if not self.mask_colors:
            return self
        if getattr(self, "mask_values", None):
            raise ValueError("give mask_values (grey or indexed masks) or mask_colors (RGB masks), not both")
        if getattr(self, "background", 0) != 0:
            raise ValueError("an RGB mask's background is background_color; leave background out")
        if parse_colour(self.background_color) in self.colours:
            raise ValueError(f"background_color {self.background_color!r} is also a class colour in mask_colors")
        return self

    @property
    def colours(self) -> dict[RGB, str]:
        """(r, g, b) -> raw label, in the manifest's order (value i + 1 is the i-th colour)."""
        return {parse_colour(text): raw for text, raw in self.mask_colors.items()}

    def value_labels(self) -> dict[int, str]:
        """Mask value -> raw label: `mask_values`, or the colours' values in the label mask the layout makes."""
        if self.mask_colors:
            return {value: raw for value, raw in enumerate(self.mask_colors.values(), start=1)}
        return dict(getattr(self, "mask_values", {}))

    def declared_labels(self) -> Iterator[tuple[str, str]]:
        for text, raw in self.mask_colors.items():
            yield f"layout.mask_colors.{text}", raw
