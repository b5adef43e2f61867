"""Layouts of whole volumes listed in a table: a DICOM series (a folder of slices) or a NIfTI file per row."""
from __future__ import annotations

import string
from typing import Literal

from pydantic import Field, field_validator, model_validator

from mmbu.curation.manifest.layout_base import DatasetPath, TableLabels


class VolumeTableLayout(TableLabels):
    """A CSV/TSV naming one volume per row and its label; the volume becomes one sample.

    `volume` builds the path from the row with Python format fields, e.g. the RSNA-MICCAI brain tumour
    challenge's `train/{BraTS21ID:0>5}/FLAIR` (a folder of `Image-<n>.dcm` slices) or a NIfTI file name;
    or `series_column` names a column of SeriesInstanceUIDs, found among the DICOM files under
    `volumes_root`. A DICOM series is ordered by ImagePositionPatient along the slice normal
    (InstanceNumber when positions are missing) and the slice `convert.slice` picks (middle by default)
    is converted; every other file of the series is a companion, so a changed slice converts again.
    A NIfTI file or a multi-frame DICOM file is converted as it is (the converter picks the slice or
    frame). The label comes from the row as in `label_table`.
    """

    kind: Literal["volume_table"]
    table: DatasetPath
    volume: DatasetPath | None = Field(None, description="Path of the volume made from the row, e.g. 'train/{BraTS21ID:0>5}/FLAIR'.")
    series_column: str | None = Field(None, description="Column of SeriesInstanceUIDs to find under volumes_root.")
    volumes_root: DatasetPath = "."
    delimiter: str | None = None
    metadata_columns: dict[str, str] = Field(default_factory=dict)

    @field_validator("volume")
    @classmethod
    def _format_fields(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                fields = [name for _, name, _, _ in string.Formatter().parse(value) if name is not None]
            except ValueError as exc:
                raise ValueError(f"{value!r} is not a format string ({exc})") from None
            if not fields:
                raise ValueError(f"{value!r} names no column (write e.g. 'train/{{BraTS21ID:0>5}}/FLAIR')")
        return value

    @model_validator(mode="after")
    def _one_way_to_the_volume(self) -> "VolumeTableLayout":
        if (self.volume is None) == (self.series_column is None):
            raise ValueError("give exactly one of volume (a path made from the row) and series_column")
        return self

    @property
    def volume_columns(self) -> list[str]:
        if self.volume is None:
            return [self.series_column]
        return [name.split(".")[0].split("[")[0] for _, name, _, _ in string.Formatter().parse(self.volume) if name]
