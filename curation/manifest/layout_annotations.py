"""Layouts of annotation files that are not COCO, YOLO or VOC: field-mapped box tables (JSON or CSV)
and polygon annotations (Aperio/ImageScope XML, LabelMe JSON, CVAT XML)."""
from __future__ import annotations

from collections.abc import Iterator
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from mmbu.core.boxes import BOX_ROLES, box_shape_problem
from mmbu.curation.manifest.hints import did_you_mean
from mmbu.curation.manifest.layout_base import BOXES, BoxOrder, DatasetPath, LayoutBase, MASKS, RowFilter
from mmbu.curation.manifest.templates import PathTemplate, parse_template

# The last entry of a headerless file's `columns` that leaves every further field of a line unread.
REST_OF_LINE = "..."


class BoxFields(BaseModel):
    """Where a box's four numbers are: each role names a field (a dotted path into a JSON record, or a
    CSV column), or `list` names one field holding all four in `order`. Naming roles instead of
    assuming an order covers row/column sources (BBBC041's `minimum.r` is y1, `minimum.c` is x1)."""

    model_config = ConfigDict(extra="forbid")

    x1: str | None = None
    y1: str | None = None
    x2: str | None = None
    y2: str | None = None
    cx: str | None = None
    cy: str | None = None
    width: str | None = None
    height: str | None = None
    list: str | None = Field(None, description="One field holding the four numbers, e.g. COCO-like 'bbox'.")
    order: BoxOrder | None = Field(None, description="Roles of the list's numbers, e.g. [y1, x1, y2, x2].")

    @model_validator(mode="after")
    def _one_shape(self) -> "BoxFields":
        if self.list is not None:
            if self.order is None:
                raise ValueError("a box list needs `order` naming the roles of its four numbers, e.g. "
                                 "[x1, y1, width, height]")
            if self.named:
                raise ValueError("give either `list` with `order` or one field per role, not both")
            return self
        if problem := box_shape_problem(list(self.named)):
            raise ValueError(f"box fields: {problem}")
        return self

    @property
    def named(self) -> dict[str, str]:
        return {role: getattr(self, role) for role in BOX_ROLES if getattr(self, role) is not None}


class BoxTableLayout(RowFilter):
    """Boxes in a one-off JSON or CSV format, found by naming where each piece is.

    JSON (`format: json`): `records` is the dotted path of the list of image records ('' for a top-level
    list; JSON lines, `format: jsonl`, hold one record per line); in each record `image` is the path of the image field and `objects` that of its list of
    objects (BBBC041: `image.pathname`, `objects`, each with `bounding_box.minimum.r`/`.c`,
    `maximum.r`/`.c` and `category`). CSV (`format: csv`): one row per box, rows of one image grouped
    (RSNA pneumonia: `patientId,x,y,width,height,Target`). A row or object whose box fields are all
    empty, or whose `no_object` field holds one of its values, says the image holds no object: the
    image is recorded as dropped with that reason, never as an error. `where` keeps only the rows
    (objects) whose fields hold the listed values (NuCLS: `{type: [rectangle]}`). When no one field names the
    image (rows naming a slide in one column and a region of it in another, boxes in that region's image),
    `image` is a template of fields, `{slide}/{roi}`, filled from each row (record). A JSON file keyed by
    slide then region (`{"0A_a": {"roi0": {"bboxes": [[x1, y1, x2, y2], ...], "classes": [...]}}}`) names its
    levels in `keys` ([slide, roi]), and `objects` may list parallel lists ([bboxes, classes]) zipped into objects.

    Instead of one `table`, `annotations` may be a template of one box file per image, paired with the
    `images` template by their shared parts (BBBC042: `positions/{n}.txt` with `images/{n}.png`); each
    line of such a file is one box. A file without a header names its columns by position in
    `columns` (`_` for a column that is not used; a last entry `...` leaves any further fields unread, for files
    whose leading columns are documented but not their number), and `delimiter: whitespace` splits on runs of spaces.
    """

    kind: Literal["box_table"]
    table: DatasetPath | None = Field(None, description="The one JSON or CSV file holding every image's boxes.")
    annotations: DatasetPath | None = Field(
        None, description="Template of one CSV/text box file per image, paired with `images`, e.g. 'positions/{n}.txt'.")
    images: DatasetPath | None = Field(None, description="Template of the image files (with `annotations`), e.g. "
                                                         "'images/{n}.png'.")
    format: Literal["json", "jsonl", "csv"] | None = Field(
        None, description="From the suffix when omitted (.json: json, .jsonl/.ndjson: jsonl, anything else: csv); "
                          "jsonl: JSON lines, one record per line.")
    records: str = Field("", description="JSON: dotted path of the list of records ('' = the top level).")
    objects: str | list[str] | None = Field(
        None, description="JSON: dotted path (in a record) of its list of objects; several paths: parallel lists "
                          "zipped into objects whose fields are those paths ([bboxes, classes]); omitted: each "
                          "record is one object.")
    keys: list[str] | None = Field(
        None, min_length=1, description="JSON: `records` is a mapping nested this many levels deep (slide -> region "
                                        "-> record) instead of a list; each level's key becomes the field of that name "
                                        "for `image`, e.g. [slide, roi] with image '{slide}/{slide}__{roi}.tif'.")
    image: str | None = Field(None, description="With `table`: field (dotted path or column) holding the image path "
                                                "or id, or a template joining several fields, e.g. '{slide}/{roi}' "
                                                "(a region of a slide, named by two columns).")
    columns: list[str] | None = Field(None, min_length=1, description="CSV without a header: the name of each column "
                                                                      "by position ('_' for one not used; a last '...' "
                                                                      "leaves any further fields unread).")
    label: str | None = Field(None, description="Field of an object holding its raw label.")
    fixed_label: str | None = Field(None, description="Raw label of every object when no field holds one.")
    box: BoxFields
    units: Literal["pixels", "fractions"] = Field("pixels", description="fractions: of the image's width/height.")
    max_corner: Literal["exclusive", "inclusive"] = Field(
        "exclusive", description="inclusive: x2/y2 name the last pixel inside the box (VOC style), so one is added.")
    no_object: dict[str, list[str]] = Field(default_factory=dict,
                                            description="Field -> values that mean the image holds no object.")
    image_root: DatasetPath = "."
    image_suffix: str = ""
    delimiter: str | None = Field(None, description="CSV: sniffed (comma, tab or semicolon) when omitted; "
                                                    "'whitespace' splits on runs of spaces and tabs.")

    @model_validator(mode="after")
    def _label_source(self) -> "BoxTableLayout":
        if (self.label is None) == (self.fixed_label is None):
            raise ValueError("give exactly one of label (the field holding each object's raw label) and fixed_label")
        if self.table_format == "csv" and (self.records or self.objects or self.keys):
            raise ValueError("records, objects and keys are JSON paths; a CSV box table has one row per box")
        if self.table_format == "jsonl" and (self.records or self.keys):
            raise ValueError("in JSON lines every line is one record: leave records and keys out")
        return self

    @model_validator(mode="after")
    def _keys_and_parallel_lists(self) -> "BoxTableLayout":
        for name in self.keys or []:
            if not name.isidentifier():
                raise ValueError(f"keys names the levels of the records mapping for image templates; {name!r} is not "
                                 "a name (letters, digits and _)")
        if self.keys and len(set(self.keys)) != len(self.keys):
            raise ValueError(f"keys names a level twice: {self.keys}")
        if isinstance(self.objects, list) and (len(self.objects) < 2 or len(set(self.objects)) != len(self.objects)):
            raise ValueError("objects as a list names two or more different parallel lists (e.g. [bboxes, classes]); "
                             "one list of objects is a single path")
        return self

    @model_validator(mode="after")
    def _one_table_or_one_file_per_image(self) -> "BoxTableLayout":
        if (self.table is None) == (self.annotations is None):
            raise ValueError("give table (one file for all images) or annotations (a template of one box file per "
                             "image, with images), not both")
        if self.table is not None:
            if self.image is None:
                raise ValueError("a box table needs image: the field or column naming each box's image")
            if self.images is not None:
                raise ValueError("images pairs per-image box files (annotations); a table names its images in image")
            if self.image_template is not None:
                if not self.image_template.names:
                    raise ValueError(f"image {self.image!r} names no field: write a field, or a template such as "
                                     "'{slide}/{roi}'")
                if any(ch in self.image for ch in "*?["):
                    raise ValueError(f"image {self.image!r} is filled from each row's fields; it cannot hold a "
                                     "wildcard (put a folder pattern in image_root)")
            return self
        if self.image is not None or self.image_suffix or self.image_root != ".":
            raise ValueError("with annotations the image of a box file is the file of images it pairs with; leave out "
                             "image, image_root and image_suffix")
        if self.images is None:
            raise ValueError("annotations pairs each box file with an image: give images (a template)")
        if not set(parse_template(self.images).names) & set(parse_template(self.annotations).names):
            raise ValueError(f"annotations {self.annotations!r} shares no named part with images {self.images!r}")
        if self.table_format != "csv":
            raise ValueError("per-image box files (annotations) are CSV or text, one box per line; a JSON box file "
                             "is read as one table")
        return self

    @model_validator(mode="after")
    def _columns_name_every_field(self) -> "BoxTableLayout":
        if self.columns is None:
            return self
        if self.table_format != "csv":
            raise ValueError("columns names the columns of a CSV without a header; a JSON file names its fields")
        if REST_OF_LINE in self.columns[:-1]:
            raise ValueError(f"{REST_OF_LINE!r} may only end columns (every field after the named ones is left "
                             f"unread); it stands at position {self.columns.index(REST_OF_LINE) + 1}")
        named = [c for c in self.columns if c not in ("_", REST_OF_LINE)]
        if len(named) != len(set(named)):
            raise ValueError(f"columns names a column twice: {sorted({c for c in named if named.count(c) > 1})}")
        fields = [*self.box.named.values(), *([self.box.list] if self.box.list else []), *self.where,
                  *self.no_object, *([self.label] if self.label else []), *self.image_fields]
        for field in fields:
            if field not in named:
                raise ValueError(f"{field!r} is not among columns {self.columns}{did_you_mean(field, named)}")
        return self

    @property
    def image_template(self) -> PathTemplate | None:
        """`image` as a template of fields (`{slide}/{roi}`), or None when it names one field."""
        return parse_template(self.image) if self.image and "{" in self.image else None

    @property
    def image_fields(self) -> list[str]:
        """The fields whose values name a row's image."""
        if self.image_template is not None:
            return list(self.image_template.names)
        return [self.image] if self.image else []

    @property
    def table_format(self) -> str:
        name = (self.table or self.annotations or "").lower()
        if self.format:
            return self.format
        return "json" if name.endswith(".json") else "jsonl" if name.endswith((".jsonl", ".ndjson")) else "csv"

    def feeds(self) -> frozenset[str]:
        return BOXES

    def declared_labels(self) -> Iterator[tuple[str, str]]:
        if self.fixed_label:
            yield "layout.fixed_label", self.fixed_label


class PolygonsLayout(LayoutBase):
    """Polygon annotations, drawn into masks at the image's size (and boxed from the drawn mask).

    - `aperio_xml`: Aperio ImageScope XML, `Annotations/Annotation/Regions/Region/Vertices/Vertex@X,Y`,
      one file per image paired by templates (MoNuSeg: `Tissue Images/{stem}.tif` with
      `Annotations/{stem}.xml`); the label is `fixed_label`, or the `Annotation`'s `Name` attribute.
    - `labelme_json`: LabelMe JSON, one file per image naming it in `imagePath` (relative to the JSON)
      with `shapes[]` of `label`, `points` and `shape_type` (`polygon`, `rectangle`).
    - `cvat_xml`: CVAT for images 1.1, one XML for all images: `image@name,width,height` holding
      `polygon@label,points` ("x,y;x,y;...") and `box@label,xtl,ytl,xbr,ybr`.
    - `geojson`: GeoJSON FeatureCollections, one file per image paired by templates like `aperio_xml`
      (PUMA: `01_training_dataset_tif_ROIs/{roi}.tif*` with
      `01_training_dataset_geojson_nuclei/{roi}_nuclei.geojson`); each Feature with a Polygon (outline and
      holes) or MultiPolygon geometry is one object, labelled by the dotted `label_property` of its
      `properties` (QuPath's `classification.name`) or by `fixed_label`. `y_axis: up` reads y counted
      from the bottom edge (HPA's Kaibu `annotation.json`: row = height - y).

    Vertices are pixel centres (vertex (x, y) is the centre of column x, row y) and the outline's
    pixels belong to the object, as Pillow's `ImageDraw.polygon` draws it. Where objects overlap the
    later one keeps the shared pixels. A polygon of fewer than three points, an object drawn wholly
    outside its image and an annotation naming another image size are exclusions.
    """

    kind: Literal["polygons"]
    format: Literal["aperio_xml", "labelme_json", "cvat_xml", "geojson"]
    annotations: DatasetPath = Field(description="aperio_xml, geojson: template paired with `images`; labelme_json: "
                                                 "glob of the JSON files; cvat_xml: the XML file.")
    images: DatasetPath | None = Field(None, description="aperio_xml, geojson: template of the image files, e.g. "
                                                 "'Tissue Images/{stem}.tif'.")
    label_property: str | None = Field(None, description="geojson: dotted path in each Feature's properties holding "
                                                         "its raw label, e.g. 'classification.name'.")
    y_axis: Literal["down", "up"] = Field("down", description="geojson: `up` when y counts from the image's bottom "
                                                               "edge (Kaibu/ImJoy files such as HPA's).")
    image_root: DatasetPath = Field(".", description="cvat_xml: folder the image names are relative to; "
                                                     "labelme_json: folder holding the images, found by the file "
                                                     "name in imagePath (default: imagePath relative to the JSON).")
    fixed_label: str | None = Field(None, description="Raw label of every object (MoNuSeg: nucleus).")
    min_region_pixels: int = Field(1, ge=1)

    @model_validator(mode="after")
    def _format_fields(self) -> "PolygonsLayout":
        if self.format in ("aperio_xml", "geojson"):
            if self.images is None:
                raise ValueError(f"{self.format} pairs annotation files with images: give images (a template)")
            if not set(parse_template(self.images).names) & set(parse_template(self.annotations).names):
                raise ValueError(f"annotations {self.annotations!r} shares no named part with images {self.images!r}")
        elif self.images is not None:
            raise ValueError(f"{self.format} names its images inside the annotations; images is for aperio_xml "
                             "and geojson")
        if self.format != "geojson" and (self.label_property is not None or self.y_axis != "down"):
            raise ValueError(f"label_property and y_axis are for geojson; {self.format} names labels its own way")
        if self.format == "geojson" and (self.label_property is None) == (self.fixed_label is None):
            raise ValueError("geojson needs label_property (where a Feature's properties name its label) or "
                             "fixed_label" if self.label_property is None else
                             "give label_property or fixed_label, not both")
        return self

    def feeds(self) -> frozenset[str]:
        return MASKS | BOXES

    def declared_labels(self) -> Iterator[tuple[str, str]]:
        if self.fixed_label:
            yield "layout.fixed_label", self.fixed_label
