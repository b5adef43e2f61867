"""Polygon annotations (Aperio/ImageScope XML, LabelMe JSON, CVAT XML, GeoJSON) drawn into an instance mask at
the image's size; each object's box is the box of its drawn pixels."""
from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PureWindowsPath

import numpy as np
from PIL import Image, ImageDraw

from mmbu.build.layouts.context import LayoutContext
from mmbu.build.layouts.files import glob_files, image_size
from mmbu.build.layouts.geojson import GeoJsonError, Polygon, feature_key, feature_label, feature_polygons, read_features
from mmbu.build.layouts.instances import InstanceCanvas
from mmbu.build.layouts.pairing import paired_files
from mmbu.core import budget
from mmbu.core.text import printable_path
from mmbu.curation.manifest.layout_annotations import PolygonsLayout

DRAWING = ("polygons drawn with Pillow ImageDraw.polygon at the image's size: vertices at pixel centres, "
           "outline pixels included, later objects over earlier ones")


@dataclass(frozen=True)
class Shape:
    label: str | None
    instance: str
    points: list[tuple[float, float]]
    holes: tuple[list[tuple[float, float]], ...] = ()  # GeoJSON: inner rings, cleared inside the outline
    more: tuple[Polygon, ...] = ()  # GeoJSON MultiPolygon: the object's further (outline, holes)


@dataclass(frozen=True)
class Annotated:
    """One image and what its annotation file says about it."""

    image: Path
    source: Path
    shapes: list[Shape]
    declared_size: tuple[int, int] | None = None
    problems: tuple[tuple[str, str], ...] = ()  # (instance, reason) found while parsing


def read(layout: PolygonsLayout, ctx: LayoutContext) -> None:
    parse = {"aperio_xml": _aperio, "labelme_json": _labelme, "cvat_xml": _cvat, "geojson": _geojson}[layout.format]
    for annotated in parse(layout, ctx):
        _add(layout, ctx, annotated)


def _add(layout: PolygonsLayout, ctx: LayoutContext, annotated: Annotated) -> None:
    if not ctx.contains(annotated.image):  # checked before anything opens it, or its header (its size) would leak
        ctx.exclude(ctx.rel(annotated.source), f"names the image {printable_path(annotated.image)}, which lies outside "
                                               "the dataset's folder; only files inside it are read")
        return
    where = ctx.rel(annotated.image) if annotated.image.exists() else str(annotated.image)
    for instance, reason in annotated.problems:
        ctx.exclude(f"{where}#{instance}", reason)
    size = image_size(annotated.image) if annotated.image.is_file() else None
    if size is None:
        ctx.add(annotated.image, grounded=True)  # reports the missing or unreadable image in one place
        return
    if annotated.declared_size and annotated.declared_size != size:
        ctx.exclude(where, f"the annotation is for a {annotated.declared_size[0]}x{annotated.declared_size[1]} image "
                           f"but the image is {size[0]}x{size[1]}")
        return
    try:  # a 13000² canvas, or 60,000 shapes each drawn at the image's size, is refused before it is drawn
        budget.check_instances(where, len(annotated.shapes))
        canvas = InstanceCanvas(height=size[1], width=size[0], name=where)
    except budget.OverBudget as exc:
        ctx.exclude(where, str(exc))
        return
    for shape in annotated.shapes:
        if len(shape.points) < 3:
            ctx.exclude(f"{where}#{shape.instance}", f"a polygon needs at least three points; this one has "
                                                     f"{len(shape.points)}")
            continue
        label = shape.label if shape.label is not None else layout.fixed_label
        canvas.paint(_draw(shape, size), label or "", shape.instance)
    regions, problems = canvas.regions(layout.min_region_pixels)
    for instance, reason in problems:
        ctx.exclude(f"{where}#{instance}", reason if "empty" not in reason else
                    "the polygon covers no pixel of the image (it lies outside it)")
    if not regions:
        if not problems:
            ctx.exclude(where, "the annotation holds no polygon")
        return
    mask_path = ctx.store_mask(annotated.image, canvas.ids, [annotated.source])
    ctx.add(annotated.image, regions=regions, mask_path=mask_path, size=size, grounded=True,
            provenance={"masks": DRAWING})


def _draw(shape: Shape, size: tuple[int, int]) -> np.ndarray:
    canvas = Image.new("1", size, 0)
    draw = ImageDraw.Draw(canvas)
    for outline, holes in ((shape.points, shape.holes), *shape.more):
        draw.polygon(outline, fill=1, outline=1)
        for hole in holes:  # a hole's inside is cleared; its outline is the object's edge and stays
            draw.polygon(hole, fill=0)
            draw.polygon(hole, outline=1)
    return np.asarray(canvas, dtype=bool)


def _aperio(layout: PolygonsLayout, ctx: LayoutContext) -> Iterator[Annotated]:
    """MoNuSeg-style pairs: `Annotations/Annotation[@Name]/Regions/Region[@Id]/Vertices/Vertex[@X,@Y]`."""
    for xml_path, image in paired_files(ctx, layout.images or "", layout.annotations):
        try:
            root = ET.fromstring(budget.read_annotation_bytes(xml_path))
        except budget.OverBudget as exc:
            ctx.exclude(ctx.rel(xml_path), str(exc))
            continue
        except (OSError, ET.ParseError) as exc:
            ctx.exclude(ctx.rel(xml_path), f"not a readable XML file ({exc})")
            continue
        shapes, problems = [], []
        for a_index, annotation in enumerate(root.iter("Annotation"), start=1):
            label = annotation.get("Name") or None if layout.fixed_label is None else None
            for r_index, region in enumerate(annotation.iter("Region"), start=1):
                instance = f"annotation-{annotation.get('Id', a_index)}/region-{region.get('Id', r_index)}"
                try:
                    points = [(float(v.get("X")), float(v.get("Y"))) for v in region.iter("Vertex")]
                except (TypeError, ValueError):
                    problems.append((instance, "a vertex has no numeric X and Y"))
                    continue
                shapes.append(Shape(label, instance, points))
        yield Annotated(image, xml_path, shapes, problems=tuple(problems))


def _geojson(layout: PolygonsLayout, ctx: LayoutContext) -> Iterator[Annotated]:
    """PUMA/QuPath and HPA/Kaibu pairs: a FeatureCollection per image, one object per Polygon/MultiPolygon Feature."""
    for json_path, image in paired_files(ctx, layout.images or "", layout.annotations):
        try:
            features = read_features(json_path)
        except GeoJsonError as exc:
            ctx.exclude(ctx.rel(json_path), str(exc))
            continue
        size = image_size(image) if layout.y_axis == "up" else None
        if layout.y_axis == "up" and size is None:
            ctx.add(image, grounded=True)  # reports the unreadable image in one place
            continue
        shapes, problems = [], []
        for number, feature in enumerate(features, start=1):
            instance = feature_key(feature, number)
            label = layout.fixed_label
            if layout.label_property is not None:
                label = feature_label(feature, layout.label_property)
                if label is None:
                    problems.append((instance, f"the feature has no properties.{layout.label_property} to name "
                                               "its label"))
                    continue
            try:
                (outline, holes), *more = feature_polygons(feature, size[1] if size else 0, layout.y_axis == "up")
            except ValueError as exc:
                problems.append((instance, str(exc)))
                continue
            shapes.append(Shape(label, instance, outline, holes, tuple(more)))
        yield Annotated(image, json_path, shapes, problems=tuple(problems))


def _labelme_image(layout: PolygonsLayout, ctx: LayoutContext, json_path: Path, image_path: str) -> Path:
    """The image a LabelMe file names: relative to the JSON, or, with `image_root`, by its file name in that
    folder (JSON files kept apart from their images; the name may be written with Windows separators)."""
    if layout.image_root == ".":
        return json_path.parent / image_path.replace("\\", "/")  # confined by `_add` before it is opened
    return ctx.path(layout.image_root, PureWindowsPath(image_path).name)


def _labelme(layout: PolygonsLayout, ctx: LayoutContext) -> Iterator[Annotated]:
    """LabelMe: `{"imagePath", "imageHeight", "imageWidth", "shapes": [{"label", "points", "shape_type"}]}`."""
    files = glob_files(ctx.raw_dir, layout.annotations, special_files=True)
    if not files:
        ctx.exclude(layout.annotations, "no LabelMe JSON file matches the annotations glob")
    for json_path in files:
        try:
            document = json.loads(budget.read_json_bytes(json_path))
            image = _labelme_image(layout, ctx, json_path, document["imagePath"])
            declared = (int(document["imageWidth"]), int(document["imageHeight"]))
            raw_shapes = list(document["shapes"])
        except budget.OverBudget as exc:
            ctx.exclude(ctx.rel(json_path), str(exc))
            continue
        except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as exc:
            ctx.exclude(ctx.rel(json_path), f"not a LabelMe file with imagePath, imageWidth, imageHeight and shapes "
                                            f"({type(exc).__name__}: {exc})")
            continue
        shapes, problems = [], []
        for number, shape in enumerate(raw_shapes, start=1):
            # shapes sharing a group_id are the parts of one object
            group = shape.get("group_id") if isinstance(shape, dict) else None
            instance = f"group-{group}" if group is not None else f"shape-{number}"
            kind = shape.get("shape_type") or "polygon"
            try:
                points = [(float(x), float(y)) for x, y in shape["points"]]
            except (KeyError, TypeError, ValueError):
                problems.append((instance, "the shape's points are not [x, y] pairs"))
                continue
            if kind == "rectangle" and len(points) == 2:
                (x1, y1), (x2, y2) = points
                points = [(x1, y1), (x2, y1), (x2, y2), (x1, y2)]
            elif kind != "polygon":
                problems.append((instance, f"shape_type {kind!r} is not an area (polygon or rectangle)"))
                continue
            shapes.append(Shape(str(shape.get("label", "")), instance, points))
        yield Annotated(image, json_path, shapes, declared, tuple(problems))


def _cvat(layout: PolygonsLayout, ctx: LayoutContext) -> Iterator[Annotated]:
    """CVAT for images 1.1: `<image name width height>` with `<polygon label points>` and `<box label xtl ...>`."""
    xml_path = ctx.path(layout.annotations)
    try:
        root = ET.fromstring(budget.read_annotation_bytes(xml_path))
    except budget.OverBudget as exc:
        ctx.exclude(layout.annotations, str(exc))
        return
    except (OSError, ET.ParseError) as exc:
        ctx.exclude(layout.annotations, f"not a readable CVAT XML file ({exc})")
        return
    image_root = ctx.path(layout.image_root)
    for entry in root.iter("image"):
        name = entry.get("name")
        if not name:
            ctx.exclude(f"{layout.annotations}#image-{entry.get('id')}", "an image entry without a name")
            continue
        try:
            declared = (int(entry.get("width")), int(entry.get("height")))
        except (TypeError, ValueError):
            declared = None
        shapes, problems = [], []
        for number, element in enumerate(entry, start=1):
            instance = f"{element.tag}-{number}"
            try:
                if element.tag == "polygon":
                    points = [_xy(pair) for pair in element.get("points", "").split(";") if pair.strip()]
                elif element.tag == "box":
                    x1, y1, x2, y2 = (float(element.get(k)) for k in ("xtl", "ytl", "xbr", "ybr"))
                    points = [(x1, y1), (x2, y1), (x2, y2), (x1, y2)]
                else:
                    problems.append((instance, f"a CVAT {element.tag} is not an area (polygon or box)"))
                    continue
            except (TypeError, ValueError):
                problems.append((instance, f"the {element.tag}'s coordinates are not numbers"))
                continue
            shapes.append(Shape(element.get("label"), instance, points))
        yield Annotated(image_root / name, xml_path, shapes, declared, tuple(problems))


def _xy(pair: str) -> tuple[float, float]:
    x, y = pair.split(",")  # a pair without exactly one comma raises ValueError: reported for the shape
    return float(x), float(y)
