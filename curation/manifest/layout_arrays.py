"""Layouts whose samples are items of arrays rather than files: NumPy stacks (`arrays`)."""
from __future__ import annotations

from collections.abc import Iterator
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from mmbu.curation.manifest.layout_base import BOXES, CLASSIFY, DatasetPath, LayoutBase, MASKS
from mmbu.curation.manifest.templates import parse_template


class ArrayRef(BaseModel):
    """An array in a `.npy` file, the member `key` of an `.npz` file, or the dataset `key` of an HDF5 file
    (`volumes/raw`). Both are templates: named parts (`{split}`, `{fold}`) tie the images, labels and masks of
    one group together."""

    model_config = ConfigDict(extra="forbid")

    file: DatasetPath = Field(description="Path template of the .npy, .npz, HDF5 or (a stack) multi-page TIFF file, "
                                          "e.g. 'Fold {fold}/images/fold{fold}/images.npy'.")
    key: str | None = Field(None, description="Member of an .npz file, e.g. '{split}_images', or dataset of an HDF5 "
                                              "file, e.g. 'volumes/raw' (a name inside the file, never a path).")
    channels: list[int] | None = Field(None, min_length=1, description="items: file: the channels of the array to take "
                                                                       "(LyNSeC: [0, 1, 2] the image, [3] the mask).")
    start: int | None = Field(None, ge=0, description="labels or masks of a stack: the images item their first item "
                                                      "belongs to, when they annotate a shorter range (a label stack "
                                                      "of frames 100-149 of a 300-frame movie: start: 100).")

    @field_validator("channels")
    @classmethod
    def _channel_numbers(cls, value: list[int] | None) -> list[int] | None:
        if value is not None and (min(value) < 0 or len(set(value)) != len(value)):
            raise ValueError(f"channels {value} must be distinct numbers from 0")
        return value

    @field_validator("file", "key")
    @classmethod
    def _template(cls, value: str | None) -> str | None:
        if value is not None:
            parse_template(value)
        return value

    @model_validator(mode="before")
    @classmethod
    def _plain_path(cls, value: object) -> object:
        return {"file": value} if isinstance(value, str) else value

    @property
    def names(self) -> set[str]:
        return set(parse_template(self.file).names) | (set(parse_template(self.key).names) if self.key else set())


ImageAxes = Literal["auto", "NHW", "NHWC", "NCHW", "NDHW", "NDHWC", "HW", "HWC", "CHW", "DHW"]
STACK_AXES = ("auto", "NHW", "NHWC", "NCHW", "NDHW", "NDHWC")
FILE_AXES = ("auto", "HW", "HWC", "CHW", "DHW")
ARRAY_SUFFIXES = (".npy", ".npz", ".h5", ".hdf5", ".hdf")  # items: file reads other files as pictures


class ArraysLayout(LayoutBase):
    """Image stacks in NumPy `.npy`/`.npz` files, HDF5 datasets or multi-page TIFF files: one sample per index of
    the first axis (a TIFF's pages: DenseCell's `train-images.tif` with `train-labels.tif`).

    MedMNIST ships one `.npz` per subset with `<split>_images` (N, 28, 28[, 3]) and `<split>_labels`
    (N, 1) members; PanNuke ships per fold `images.npy` (N, 256, 256, 3), `masks.npy` (N, 256, 256, 6:
    one channel per class holding instance ids, the last one background) and `types.npy` (tissue
    names). `labels` holds class indices (raw label `class_names[i]`, or the index as text looked up
    in `labels`), text, or multi-hot rows (one right option: see `label_table`). `masks` holds label
    masks (N, H, W), read with `mask_values`/`instances` as in `image_mask_pairs`, or per-class
    channels of instance ids (N, H, W, C) named by `mask_channels`. Files are memory-mapped and read
    one item at a time; sample ids come from the file, the member and the index.

    `items: file` reads one image per file instead (LyNSeC's `lynsec 1/<n>.npy`, one (H, W, 4) array:
    RGB in channels 0-2, instance ids in channel 3; IHC-TMA's `images/<name>.png` with a channels-first
    `masks/<name>.npy`). `images` may then name a picture file, which stays the sample; `channels` of
    an array reference picks channels (of the last axis, or the first with `axes`/`mask_axes` CHW), and
    `mask_channels` with `instances: components` splits binary channels into objects. `labels` then names the
    file's class: a one-value member of a per-sample `.npz` (FairVision's `data_<id>.npz` member `glaucoma`
    beside `slo_<id>.jpg`), read like a stack's label entry. With `axes: DHW` each
    file holds one volume (an HDF5 dataset such as Platynereis' `volumes/raw`, its labels under another key):
    one xy slice of the image and of the mask is read (`convert.slice`: an index or `mask_max_area`, else
    `convert.z`, else the middle).
    """

    kind: Literal["arrays"]
    items: Literal["stack", "file"] = Field("stack", description="stack: one sample per first-axis index; file: one "
                                                                 "image per file the images template matches, its "
                                                                 "class in labels (a one-value array) and/or its "
                                                                 "mask in masks.")
    images: ArrayRef
    labels: ArrayRef | None = None
    masks: ArrayRef | None = None
    axes: ImageAxes = Field("auto", description="Axes of the image stack: N items, D depth (a volume; the slice "
                                                "`convert.slice` picks), H, W, C channels. auto: NHW or NHWC. "
                                                "items: file takes HW, HWC, CHW or DHW (one volume per file).")
    class_names: list[str] | None = Field(None, description="Label index -> raw label (required for multi-hot rows).")
    no_finding: str | None = Field(None, description="Raw label for a multi-hot row with no positive.")
    mask_axes: Literal["auto", "HWC", "CHW"] = Field("auto", description="items: file: axes of the mask array, "
                                                                         "(H, W[, C]) or channels first.")
    mask_channels: list[str | None] | None = Field(
        None, description="Raw label of each mask channel holding instance ids (or binary masks split into objects "
                          "with instances: components); null for a background channel.")
    mask_values: dict[int, str] = Field(default_factory=dict, description="Value -> raw label of (N, H, W) masks.")
    instances: Literal["none", "components", "ids"] = "none"
    instance_label: str | None = None
    instance_classes: dict[int, str] = Field(
        default_factory=dict, description="Masks of two channels, instance ids then a class map (LyNSeC: channels "
                                          "[3, 4]): value of the class map -> raw label; each object takes the "
                                          "class most of its pixels hold.")
    background: int = 0
    min_region_pixels: int = Field(1, ge=1)
    metadata: dict[str, ArrayRef] = Field(default_factory=dict,
                                          description="Metadata field -> array of per-item text (e.g. tissue type).")
    splits: list[str] | None = Field(None, min_length=1, description="Keep only these values of the {split} part.")

    @model_validator(mode="after")
    def _items_fit_the_fields(self) -> "ArraysLayout":
        refs = (self.images, self.masks)
        if self.items == "file":
            if self.axes not in FILE_AXES:
                raise ValueError(f"items: file reads one image per file: axes is {', '.join(FILE_AXES[:-1])} or "
                                 f"{FILE_AXES[-1]}, not {self.axes}")
            if self.metadata:
                raise ValueError("per-item metadata arrays belong to stacks (items: stack)")
            if self.axes == "DHW" and self.labels is not None:
                raise ValueError("axes DHW reads one slice of a volume per file for its mask; a class per volume "
                                 "comes from volume_table")
            if self.axes == "DHW" and (self.mask_axes != "auto" or any(ref.channels for ref in refs if ref)):
                raise ValueError("axes DHW reads one slice of a volume per file: channels and mask_axes do not apply")
            if not self.images.file.lower().endswith(ARRAY_SUFFIXES) and (self.images.channels or self.images.key):
                raise ValueError(f"images {self.images.file!r} is a picture file, used whole: channels and key are "
                                 "for .npy/.npz arrays")
        else:
            if self.axes not in STACK_AXES:
                raise ValueError(f"items: stack reads a stack: axes is {', '.join(STACK_AXES[:-1])} or "
                                 f"{STACK_AXES[-1]}, not {self.axes}")
            if self.mask_axes != "auto" or any(ref is not None and ref.channels for ref in refs):
                raise ValueError("channels and mask_axes are for items: file (one image per file)")
        return self

    @model_validator(mode="after")
    def _refs_agree(self) -> "ArraysLayout":
        if self.images.start is not None or any(ref.start is not None for ref in self.metadata.values()):
            raise ValueError("start places labels or masks inside the image stack; the images and metadata arrays "
                             "take none")
        if self.items == "file" and any(ref is not None and ref.start is not None for ref in (self.labels, self.masks)):
            raise ValueError("start is for stacks (items: stack), whose labels or masks may cover fewer items")
        names = self.images.names
        for where, ref in (("labels", self.labels), ("masks", self.masks), *self.metadata.items()):
            if ref is not None and not ref.names <= names:
                raise ValueError(f"{where} uses the part(s) {sorted(ref.names - names)} that images does not name")
        if self.splits and "split" not in names:
            raise ValueError("splits filters the {split} part of images, which names none")
        if self.labels is None and self.masks is None:
            raise ValueError("arrays needs labels, masks or both")
        if self.instance_classes:
            if self.instances != "ids" or self.mask_channels or self.mask_values or self.instance_label:
                raise ValueError("instance_classes labels the objects of an instance-id channel by a class channel: "
                                 "it needs instances: ids, without mask_channels, mask_values or instance_label")
            if self.masks is not None and self.masks.channels is not None and len(self.masks.channels) != 2:
                raise ValueError("instance_classes reads two mask channels, the instance ids and the class map: "
                                 f"masks.channels names {len(self.masks.channels)}")
            return self
        if self.masks is not None and not (self.mask_channels or self.mask_values or self.instance_label):
            raise ValueError("masks need mask_channels (channels of instance ids), mask_values, instance_label or "
                             "instance_classes")
        if self.instances == "ids" and self.masks is not None and not self.mask_channels and not self.instance_label:
            raise ValueError("instances: ids needs instance_label (or instance_classes)")
        return self

    def feeds(self) -> frozenset[str]:
        tasks = CLASSIFY if self.labels is not None else frozenset()
        if self.masks is not None:
            tasks |= MASKS | (BOXES if self.mask_channels or self.instances != "none" else frozenset())
        return tasks

    def declared_labels(self) -> Iterator[tuple[str, str]]:
        for index, raw in enumerate(self.class_names or []):
            yield f"layout.class_names.{index}", raw
        for index, raw in enumerate(self.mask_channels or []):
            if raw is not None:
                yield f"layout.mask_channels.{index}", raw
        for value, raw in self.mask_values.items():
            yield f"layout.mask_values.{value}", raw
        for value, raw in self.instance_classes.items():
            yield f"layout.instance_classes.{value}", raw
        for name in ("instance_label", "no_finding"):
            if getattr(self, name):
                yield f"layout.{name}", getattr(self, name)
