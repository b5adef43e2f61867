"""What a layout reads out of a dataset: samples and their regions (the items it drops are `mmbu.core.exclusions`)."""
from __future__ import annotations

import hashlib
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from mmbu.core.boxes import Box



def make_sample_id(dataset_id: str, source_path: str, part: str | int | None = None,
                   instance: str | int | None = None) -> str:
    """A stable id from what identifies the item in its source, never from enumeration order or time.

    `source_path` is the POSIX path relative to the dataset's raw folder; `part` names which part of the file
    (a frame or slice policy, a series, an array index, a table row); `instance` the object inside the image
    (annotation id, component).
    """
    key = "\x1f".join([dataset_id, source_path, "" if part is None else str(part),
                       "" if instance is None else str(instance)])
    return f"{dataset_id}-{hashlib.sha256(key.encode('utf-8')).hexdigest()[:16]}"


class Region(BaseModel):
    """One annotated object or area inside an image, in the source image's pixel frame."""

    model_config = ConfigDict(frozen=True)

    label: str = Field(description="Raw label as found in the source (a key of the manifest's `labels`).")
    instance: str = Field(description="Stable key of the object inside its image (annotation id, value, component).")
    box: Box | None = Field(None, description="Source-frame pixel box; None for volumes until their slice is chosen.")
    mask_value: int | None = Field(None, description="Mask value of the region (image/mask pairs).")
    component: int | None = Field(None, description="1-based connected-component index (raster order) when split.")


class Sample(BaseModel):
    """One source image and everything a layout found about it."""

    model_config = ConfigDict(frozen=True)

    sample_id: str
    dataset_id: str
    source_path: str = Field(description="POSIX path of the image relative to the raw dataset folder.")
    image_path: Path
    part: str | None = Field(None, description="Which part of the source file the sample is (a frame or slice policy, "
                                               "a series, an array index, a table row); None for a whole file.")
    label: str | None = Field(None, description="Raw image-level label (classification layouts).")
    regions: tuple[Region, ...] = ()
    mask_path: Path | None = None
    image_size: tuple[int, int] | None = Field(None, description="(width, height) of the source frame when known.")
    file_metadata: dict[str, str] = Field(
        default_factory=dict, description="Header values: dicom.Modality, slide.vendor, slide.mpp_x, ...")
    row_metadata: dict[str, str] = Field(
        default_factory=dict, description="Per-sample values of metadata fields found in a label table.")
    companion_paths: tuple[Path, ...] = Field(
        (), description="Other files the converter reads with `image_path` (every instance of a DICOM whole-slide "
                        "series): a change to any of them converts the sample again.")
    provenance: dict[str, str] = Field(
        default_factory=dict, description="How the layout made `image_path`/`mask_path` when they are not files of "
                                          "the dataset (array member and index, Parquet row, mask threshold, ...).")
    view: dict[str, int | float | str] = Field(
        default_factory=dict, description="Convert options for this sample only, over the manifest's `convert:` "
                                          "(a video frame or time, a microscopy series): one file, several samples.")

    def region_id(self, region: Region) -> str:
        """The stable id of a grounded row about `region` (dataset + path + part + instance)."""
        return make_sample_id(self.dataset_id, self.source_path, self.part, region.instance)
