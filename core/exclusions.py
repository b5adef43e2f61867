"""An item that some stage dropped, with the one sentence that says why (`release/exclusions.csv`)."""
from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

from mmbu.core.text import printable_path


class Exclusion(BaseModel):
    """An item dropped by some stage, with one readable sentence saying why."""

    model_config = ConfigDict(frozen=True)

    dataset_id: str
    sample_id: str | None = None
    item: str = Field(description="The file, row or object concerned (relative path where possible).")
    stage: str = Field(description="layout, convert, metadata, questions, lint, duplicates, release ...")
    reason: str
    duplicate_of: str | None = Field(None, description="Duplicates: the sample id of the copy that was kept.")
    distance: int | None = Field(None, description="Duplicates: perceptual-hash distance to it (bits of 256; 0 = "
                                                   "the same file).")

    # a file name that is not UTF-8 arrives as surrogate escapes, which exclusions.csv cannot hold
    _printable = field_validator("item", "reason")(printable_path)


EXCLUSION_COLUMNS = ("dataset_id", "sample_id", "item", "stage", "reason", "duplicate_of", "distance")
"""The columns of `exclusions.csv`, in order: the fields of `Exclusion`."""
