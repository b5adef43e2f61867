"""How to find images, labels, boxes and masks inside a fetched dataset (consumed by mmbu.build.layouts).

Paths and globs are relative to `$MMBU_DATA/raw/<id>/` after extraction. Globs use pathlib's syntax
(`**` recurses). Raw labels found by a layout are looked up in the manifest's `labels`; anything
else becomes an exclusion record, never an error that stops the dataset.
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from mmbu.curation.manifest.hints import did_you_mean
from mmbu.curation.manifest.templates import parse_template

from mmbu.curation.manifest.layout_base import (
    BOXES, BoxOrder, CLASSIFY, ColourMasks, DatasetPath, LayoutBase, MASKS, MetadataColumns, RowFilter, TableLabels,
)
from mmbu.curation.manifest.layout_annotations import BoxTableLayout, PolygonsLayout
from mmbu.curation.manifest.layout_arrays import ArraysLayout
from mmbu.curation.manifest.layout_shapes import ChannelFiles, Panels
from mmbu.curation.manifest.layout_tables import ParquetLayout
from mmbu.curation.manifest.layout_volumes import VolumeTableLayout


EXCEL_SUFFIXES = (".xlsx", ".xlsm")  # what openpyxl reads; the legacy binary .xls needs another engine


class FolderPerClassLayout(LayoutBase):
    """<root>/<label>/<file>: the name of a class folder is the raw label.

    By default the class folders sit directly under `root`. `folders` places them deeper, as a
    template of named parts (see `templates.py`) in which `{label}` marks the class folder, e.g.
    Kermany's OCT2017 `CellData/OCT/{split}/{label}` (`train/`, `test/` above `CNV/`, `DME/`, ...);
    `splits` then keeps only some values of `{split}`. Where a release keeps the class in each file's
    name instead of a folder (`ID_0087_AGE_0044_CONTRAST_0_CT.dcm`), `images` is a template whose
    `{label}` part is the raw label and `folders` names only the levels above the files.
    """

    kind: Literal["folder_per_class"]
    root: DatasetPath = "."
    images: DatasetPath = Field("*", description="Glob for image files inside each class folder (`**/*.png` recurses); "
                                                 "or a template whose `{label}` part, a piece of the file name, is the "
                                                 "raw label (`*_CONTRAST_{label}_CT.dcm`), with no class folders.")
    folders: str | None = Field(None, description="Template of the folder levels below `root`; `{label}` is the class "
                                                  "folder, other parts (e.g. `{split}`) and `*` are further levels. "
                                                  "Default `{label}`, or `root` itself when `images` names the label.")
    splits: list[str] | None = Field(None, min_length=1,
                                     description="Keep only these values of the `{split}` part of `folders`.")

    @property
    def label_in_file_name(self) -> bool:
        """True when the raw label is a part of the file name (`images` names `{label}`)."""
        return "label" in parse_template(self.images).names

    @property
    def folder_template(self) -> str:
        """The folder levels below `root` ('' for `root` itself)."""
        if self.folders is not None:
            return self.folders
        return "" if self.label_in_file_name else "{label}"

    @field_validator("images")
    @classmethod
    def _images_is_a_template(cls, value: str) -> str:
        parse_template(value)
        return value

    @model_validator(mode="after")
    def _the_label_is_named_once(self) -> "FolderPerClassLayout":
        in_folders = "label" in parse_template(self.folder_template).names
        if in_folders and self.label_in_file_name:
            raise ValueError(f"the label is named twice, in folders {self.folder_template!r} and in images "
                             f"{self.images!r}: keep {{label}} in one of them")
        if not in_folders and not self.label_in_file_name:
            raise ValueError(f"{self.folder_template!r} must contain {{label}}, the class folder (or write "
                             "{label} in images where the file name holds the class)")
        return self

    @model_validator(mode="after")
    def _splits_need_a_split_part(self) -> "FolderPerClassLayout":
        if self.splits and "split" not in parse_template(self.folder_template).names:
            raise ValueError(f"splits filters the {{split}} part of folders, and {self.folder_template!r} has none "
                             "(write e.g. folders: '{split}/{label}')")
        return self

    def feeds(self) -> frozenset[str]:
        return CLASSIFY


class LabelTableLayout(TableLabels, RowFilter):
    """A CSV/TSV table with one row per image (labels as in `TableLabels`); extra columns may carry
    per-sample metadata. `where` keeps only the rows whose columns hold the listed values (an ISIC Archive
    bundle's `metadata.csv` mixes dermoscopic and clinical photographs: `{image_type: ['clinical: close-up']}`);
    every row it leaves out is an exclusion naming the filter."""

    kind: Literal["label_table"]
    table: DatasetPath = Field(description="The table: CSV/TSV, or an Excel workbook (.xlsx, .xlsm) read with openpyxl.")
    sheet: str | None = Field(None, description="For an Excel workbook: the sheet holding the table (its first sheet "
                                                "when omitted).")
    image_column: str
    image_root: DatasetPath = Field(".", description="Folder of the images; may hold a glob (`images_*/images`) when the "
                                             "images are spread over several folders, then found by file name.")
    delimiter: str | None = Field(None, description="Sniffed from the file (comma or tab) when omitted.")
    image_suffix: str = Field("", description="Appended to the image column's value, e.g. '.jpg' for bare ids.")
    metadata_columns: MetadataColumns = Field(
        default_factory=dict, description="Metadata field -> table column with a per-sample value (e.g. institution)."
    )
    frame_column: str | None = Field(
        None, description="For videos: the column naming the 0-based frame each row labels; every row is then one "
                          "sample (the video's path plus the frame), so one video gives as many samples as rows.")

    @model_validator(mode="after")
    def _sheet_and_delimiter_fit_the_table(self) -> "LabelTableLayout":
        excel = self.table.lower().endswith(EXCEL_SUFFIXES)
        if self.sheet is not None and not excel:
            raise ValueError(f"sheet names a sheet of an Excel workbook, and {self.table!r} is not one (.xlsx, .xlsm)")
        if self.delimiter is not None and excel:
            raise ValueError(f"{self.table!r} is an Excel workbook: its cells need no delimiter (name the sheet instead)")
        return self


class CocoLayout(LayoutBase):
    """COCO detection JSON: `images`, `annotations` (with a `bbox` each) and `categories`.

    COCO's `bbox` is `[x, y, width, height]` (the default `bbox_order`); COCO-like files that write the
    corners (MIDOG's `[x1, y1, x2, y2]`) say so with `bbox_order`, in the roles `box_table` uses. An annotation
    without a `bbox` takes the box of the vertices of its polygon `segmentation`.
    """

    kind: Literal["coco"]
    annotations: DatasetPath
    image_root: DatasetPath = "."
    bbox_order: BoxOrder = Field(("x1", "y1", "width", "height"),
                                 description="Roles of the four `bbox` numbers: [x1, y1, width, height] (COCO), "
                                             "[x1, y1, x2, y2] (corners), [cx, cy, width, height] (centre).")

    def feeds(self) -> frozenset[str]:
        return BOXES


class YoloLayout(LayoutBase):
    """YOLO txt: one `<class> <cx> <cy> <w> <h>` line per object, normalised to the image size; a YOLO segmentation
    line `<class> <x1> <y1> <x2> <y2> <x3> <y3> ...` (Ultralytics' instance-segmentation labels) is the box of its
    polygon's vertices.

    A label file is paired with the image of the same relative stem under `images`' folder, or, when `labels` is a
    template with named parts, with the image file of `images` (then a template too) that shares them: releases that
    keep their labels in a tree of their own (GRAZPEDWRI-DX: `images_part1/<stem>.png` beside
    `folder_structure/yolov5/labels/<stem>.txt`).
    """

    kind: Literal["yolo"]
    images: DatasetPath = Field(description="Glob for the image files (a template with named parts when `labels` "
                                            "is one).")
    labels: DatasetPath = Field(description="Folder holding the .txt files (mirrors the image folder tree), or a "
                                            "template of the .txt files paired with `images` by the named parts they "
                                            "share, e.g. '**/labels/{stem}.txt' with '**/{stem}.png'.")
    class_names: list[str] | None = Field(None, description="Class index -> raw label; the index itself when omitted.")
    lines: Literal["auto", "boxes", "polygons", "pose"] = Field(
        "auto", description="What a label line holds: `boxes` ('<class> <cx> <cy> <w> <h>'), `polygons` (Ultralytics "
                            "segmentation: '<class> x1 y1 x2 y2 x3 y3 ...'), `pose` (Ultralytics pose: a box, then "
                            "keypoints, which are not read), or `auto` (four numbers a box, six or more in pairs a "
                            "polygon). A pose file must say `pose`: its box-and-keypoint lines would read as polygons.")

    def feeds(self) -> frozenset[str]:
        return BOXES

    def labels_template(self) -> bool:
        """True when `labels` names the label files by a template rather than a mirroring folder."""
        return bool(parse_template(self.labels).names)

    @model_validator(mode="after")
    def _labels_template_pairs_by_shared_parts(self) -> "YoloLayout":
        if self.labels_template() and not set(parse_template(self.labels).names) & set(
                parse_template(self.images).names):
            raise ValueError(f"labels {self.labels!r} shares no named part with images {self.images!r}")
        return self

    def declared_labels(self) -> Iterator[tuple[str, str]]:
        for index, raw in enumerate(self.class_names or []):
            yield f"layout.class_names.{index}", raw


class VocLayout(LayoutBase):
    """Pascal VOC XML files (`<filename>`, `<size>`, `<object><name><bndbox>`).

    The image is `<filename>` under `image_root`, or, with `images`, the image file the XML pairs with by the
    named parts the two templates share (labelling tools that save `<stem>.xml` beside `<stem>.jpg`, in folders
    no listing names: `**/{folder}/{stem}.xml` with `**/{folder}/{stem}.jpg`); `<filename>` is then not read.
    """

    kind: Literal["voc"]
    annotations: DatasetPath = Field(description="Glob for the XML files (a template with named parts when "
                                                 "`images` is given).")
    image_root: DatasetPath = "."
    images: DatasetPath | None = Field(None, description="Template of the image files, paired with the XML files by "
                                                         "the named parts of `annotations`, e.g. '**/{stem}.jpg'.")

    def feeds(self) -> frozenset[str]:
        return BOXES

    @model_validator(mode="after")
    def _images_pair_by_shared_parts(self) -> "VocLayout":
        if self.images is None:
            return self
        if self.image_root != ".":
            raise ValueError("images pairs each XML file with its image file; leave out image_root (it joins "
                             "<filename>, which is then not read)")
        if not set(parse_template(self.images).names) & set(parse_template(self.annotations).names):
            raise ValueError(f"annotations {self.annotations!r} shares no named part with images {self.images!r}")
        return self


class ImageMaskPairsLayout(ColourMasks):
    """Image files with same-stem mask files (PNG, TIFF or NIfTI label volumes).

    `mask_values` maps a mask value to a raw label, or `mask_colors` a colour of an RGB mask (see
    `ColourMasks`); `background` is ignored. `instances` says how objects are separated: `none` (one
    region per value), `components` (connected components of each value are separate objects) or `ids`
    (every value is one object of class `instance_label`). With `panels` each image file holds its mask in a
    panel beside the image (DeepLIIF), and `masks` is left out.
    """

    kind: Literal["image_mask_pairs"]
    images: DatasetPath
    masks: DatasetPath | None = Field(None, description="Glob of the mask files (paired by stem); left out when "
                                                         "`panels` finds each mask inside its image file.")
    panels: Panels | None = Field(None, description="Each file of `images` holds equal panels side by side, the image "
                                                    "in one and its mask in another (DeepLIIF).")
    mask_suffix: str = Field("", description="Removed from a mask's stem before pairing, e.g. '_mask'.")
    mask_values: dict[int, str] = Field(default_factory=dict)
    background: int = 0
    instances: Literal["none", "components", "ids"] = "none"
    instance_label: str | None = Field(None, description="Raw label of every object when instances is 'ids' (or "
                                                          "with object_colors).")
    object_colors: bool = Field(False, description="RGB masks whose colours only tell objects apart (BBBC039: "
                                                   "touching nuclei differ in colour): each connected piece of one "
                                                   "colour is an object of instance_label; needs instances: "
                                                   "components.")
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
        if (self.masks is None) == (self.panels is None):
            raise ValueError("give masks (a glob of mask files) or panels (the mask is a panel of each image file), "
                             "one of the two")
        if self.instances == "ids" and not self.instance_label:
            raise ValueError("instances: ids needs instance_label (the raw label of every object)")
        if self.instances == "ids" and self.mask_colors:
            raise ValueError("mask_colors names classes; instances: ids reads values as object ids")
        if self.object_colors and (self.instances != "components" or not self.instance_label or self.mask_colors
                                   or self.mask_values):
            raise ValueError("object_colors separates objects by colour: it needs instances: components and "
                             "instance_label, without mask_colors or mask_values")
        return self

    def feeds(self) -> frozenset[str]:
        # boxes need separate objects: connected components or instance ids
        return MASKS if self.instances == "none" else MASKS | BOXES

    def declared_labels(self) -> Iterator[tuple[str, str]]:
        yield from super().declared_labels()
        for value, raw in self.mask_values.items():
            yield f"layout.mask_values.{value}", raw
        if self.instance_label:
            yield "layout.instance_label", self.instance_label


class MaskFilesLayout(ColourMasks):
    """Masks paired with images by path templates with named parts, not only by the same stem.

    `image` is a template for the image files; each of `masks` is a template whose parts shared with
    `image` say which image a mask belongs to; its other parts and globs let one image have several
    mask files. `objects` says what one mask file holds:

    - `file`: the file is one object (the 2018 Data Science Bowl's `<id>/masks/*.png`, one PNG per
      nucleus; BUSI's `benign (4)_mask.png` plus `benign (4)_mask_1.png` for a second lesion);
    - `values`: each value is one object (KiTS19's `segmentation.nii.gz`: 1 kidney, 2 tumour);
    - `components`: each connected component is one object (of the foreground when `label` or
      `label_part` gives the file one class, else of each value);
    - `ids`: each value is an instance id of one class.

    The raw label is `label` (every object), a value of `mask_values`, or the text of the named part
    `label_part`: a part of `image` (BUSI's class folder) or of every mask template (ISIC 2018 Task 2's
    `ISIC_0000000_attribute_globules.png`, one file per dermoscopic attribute: several masks of one
    image, each naming its own label). `empty_masks: absent` reads an all-zero mask file as "this
    object is not in the image" rather than as a broken file (ISIC's attribute masks are empty where
    the attribute is absent). Lossy (JPEG) masks are thresholded: with `objects: file`
    or `components` a pixel belongs to the object when its value is at least `threshold` (default
    128); with `values` each pixel takes the nearest declared value and structures thinner than three
    pixels are removed, so compression ringing never becomes specks of another class. The threshold
    used is recorded in the sample's provenance. A colour mask file of one object (CELLULAR's cells, whose
    colours say nothing) is every pixel not of `background_color`.

    `pair_by: rank` pairs the n-th image with the n-th mask, in natural order, inside groups of files sharing
    their named parts, for numberings that differ (Arvidsson's nuclei, CHAOS); `channels` composes one sample
    from per-channel image files (CELLULAR's `_w1`, `_w2`, `_w3`).
    """

    kind: Literal["mask_files"]
    image: DatasetPath = Field(description="Template of the image files, e.g. 'stage1_train/{id}/images/{id}.png'.")
    masks: list[DatasetPath] = Field(min_length=1, description="Templates of the mask files, e.g. "
                                                       "['stage1_train/{id}/masks/*.png'].")
    objects: Literal["file", "values", "components", "ids"] = "values"
    label: str | None = Field(None, description="Raw label of every object (objects: file or ids).")
    label_part: str | None = Field(None, description="Named part of `image`, or of every mask template, whose text is "
                                                     "the raw label (e.g. `{attribute}` in '{id}_attribute_{attribute}.png').")
    empty_masks: Literal["exclude", "absent"] = Field(
        "exclude", description="An all-zero mask file: an exclusion (default), or `absent`: the object is not in "
                               "the image, which is no error (objects: file).")
    mask_values: dict[int, str] = Field(default_factory=dict, description="Mask value -> raw label (objects: "
                                                                          "values or components).")
    background: int = 0
    threshold: int | None = Field(None, ge=1, le=255, description="Foreground from this value up (8-bit masks); "
                                                                  "128 for JPEG masks when omitted.")
    min_region_pixels: int = Field(1, ge=1, description="Objects smaller than this are dropped as specks.")
    pair_by: Literal["parts", "rank"] = Field(
        "parts", description="parts: a mask belongs to the image whose named parts it shares; rank: inside each group "
                             "of files with the same named parts, the n-th image in natural order (img2 before img10) "
                             "takes the n-th mask, for numberings that differ (one mask template).")
    channels: ChannelFiles | None = Field(
        None, description="One sample from several image files, one per channel, that differ in one named part of "
                          "`image` (CELLULAR's `_w1`, `_w2`, `_w3`).")
    object_colors: bool = Field(False, description="RGB mask files whose colours only tell the objects of one file "
                                                   "apart (Arvidsson's nuclei: one colour per nucleus): each connected "
                                                   "piece of one colour is an object of `label`; needs objects: "
                                                   "components.")

    @field_validator("image")
    @classmethod
    def _image_template(cls, value: str) -> str:
        parse_template(value)
        return value

    @model_validator(mode="after")
    def _masks_share_parts_and_labels_are_given(self) -> "MaskFilesLayout":
        image_names = set(parse_template(self.image).names)
        mask_names = [set(parse_template(text).names) for text in self.masks]
        if self.pair_by == "rank":
            if len(self.masks) != 1:
                raise ValueError("pair_by: rank pairs the n-th image with the n-th mask of one mask template; "
                                 f"masks names {len(self.masks)}")
            if extra := mask_names[0] - image_names:
                raise ValueError(f"with pair_by: rank every named part of the mask template must be one of image's "
                                 f"(it groups the masks of an image group); {sorted(extra)} is not")
        elif not image_names:
            raise ValueError(f"{self.image!r} names no part (such as {{stem}} or {{id}}) to pair masks by "
                             "(or pair them by rank: pair_by: rank)")
        else:
            for text, names in zip(self.masks, mask_names):
                if not image_names & names:
                    raise ValueError(f"mask template {text!r} shares no named part with image {self.image!r}, "
                                     "so no mask can be paired with an image (or pair them by rank: pair_by: rank)")
        if self.channels is not None:
            if self.channels.part not in image_names:
                raise ValueError(f"channels.part {self.channels.part!r} is not a named part of image {self.image!r}"
                                 f"{did_you_mean(self.channels.part, sorted(image_names))}")
            if any(self.channels.part in names for names in mask_names) or self.label_part == self.channels.part:
                raise ValueError(f"channels.part {self.channels.part!r} tells the channel files of one sample apart; "
                                 "the masks and the label are the sample's, so it cannot be a part of them")
        if self.label_part is not None and self.label_part not in image_names and not all(
                self.label_part in names for names in mask_names):
            parts = sorted(image_names.union(*mask_names))
            raise ValueError(f"label_part {self.label_part!r} is not a part of image or of every mask template"
                             f"{did_you_mean(self.label_part, parts)}")
        if self.empty_masks == "absent" and self.objects != "file":
            raise ValueError(f"empty_masks: absent is for objects: file (one object per mask file); with objects: "
                             f"{self.objects} an empty file already holds no object")
        by_file = self.objects in ("file", "ids")
        if by_file and not (self.label or self.label_part):
            raise ValueError(f"objects: {self.objects} needs label (one raw label for every object) or label_part")
        binary_components = self.objects == "components" and self.label
        if not by_file and not (self.mask_values or self.mask_colors or self.label_part or binary_components):
            raise ValueError(f"objects: {self.objects} needs mask_values (mask value -> raw label), mask_colors "
                             "or label_part")
        if self.object_colors and (self.objects != "components" or not self.label or self.mask_colors
                                   or self.mask_values or self.label_part):
            raise ValueError("object_colors separates the objects of a file by colour: it needs objects: components "
                             "and label, without mask_colors, mask_values or label_part")
        if by_file and self.mask_colors:
            raise ValueError(f"mask_colors names the classes of a label mask; objects: {self.objects} reads a file "
                             "as one object or as instance ids (use objects: values or components)")
        return self

    def feeds(self) -> frozenset[str]:
        return MASKS if self.objects == "values" else MASKS | BOXES

    def declared_labels(self) -> Iterator[tuple[str, str]]:
        yield from super().declared_labels()
        for value, raw in self.mask_values.items():
            yield f"layout.mask_values.{value}", raw
        if self.label:
            yield "layout.label", self.label


Layout = Annotated[
    FolderPerClassLayout | LabelTableLayout | CocoLayout | YoloLayout | VocLayout | ImageMaskPairsLayout
    | MaskFilesLayout | ArraysLayout | BoxTableLayout | PolygonsLayout | ParquetLayout | VolumeTableLayout,
    Field(discriminator="kind"),
]
