"""COCO detection JSON: one sample per image entry, one region per annotation. An annotation without a `bbox` (some
exporters write only the polygon `segmentation`) takes the box of its polygons' vertices."""
from __future__ import annotations

import json
from collections import defaultdict

from mmbu.build.layouts.boxes import Box, clip_box, ordered_box, vertices_box
from mmbu.build.layouts.context import LayoutContext
from mmbu.build.layouts.sample import Region
from mmbu.core import budget
from mmbu.curation.manifest.layout import CocoLayout


def read(layout: CocoLayout, ctx: LayoutContext) -> None:
    try:
        document = json.loads(budget.read_json_bytes(ctx.path(layout.annotations)))
        images = {entry["id"]: entry for entry in document["images"]}
        categories = {entry["id"]: str(entry["name"]) for entry in document["categories"]}
        annotations = list(document["annotations"])
    except budget.OverBudget as exc:
        ctx.exclude(layout.annotations, str(exc))
        return
    except (OSError, ValueError, KeyError, TypeError) as exc:
        ctx.exclude(layout.annotations, f"not a readable COCO file with images, categories and annotations ({exc!r})")
        return
    by_image: dict[object, list[dict]] = defaultdict(list)
    for ann in annotations:
        if ann.get("image_id") not in images:
            ctx.exclude(f"{layout.annotations}#ann-{ann.get('id')}",
                        f"annotation refers to image id {ann.get('image_id')!r}, which the file does not list")
            continue
        by_image[ann["image_id"]].append(ann)
    image_root = ctx.path(layout.image_root)
    for image_id in sorted(images, key=str):
        entry = images[image_id]
        if not isinstance(entry.get("file_name"), str) or not entry["file_name"]:
            ctx.exclude(f"{layout.annotations}#image-{image_id}", "image entry without a file_name")
            continue
        try:
            size = (int(entry["width"]), int(entry["height"])) if entry.get("width") and entry.get("height") else None
        except (TypeError, ValueError, OverflowError):  # OverflowError: a width of Infinity
            size = None  # read from the file instead
        path = image_root / entry["file_name"]
        regions = []
        for ann in sorted(by_image.get(image_id, []), key=lambda a: str(a.get("id"))):
            where = f"{entry['file_name']}#ann-{ann.get('id')}"
            if ann.get("category_id") not in categories:
                ctx.exclude(where, f"category id {ann.get('category_id')!r} is not among the file's categories")
                continue
            try:
                if ann.get("bbox") in (None, []) and "segmentation" in ann:
                    box, problem = clip_box(polygon_box(ann["segmentation"]), size)
                else:
                    box, problem = clip_box(ordered_box(ann["bbox"], layout.bbox_order), size)
            except NotPolygons as exc:
                box, problem = None, f"no bbox, and its segmentation {exc}"
            except (KeyError, TypeError, ValueError):
                box, problem = None, f"bbox {ann.get('bbox')!r} is not four numbers [{', '.join(layout.bbox_order)}]"
            if box is None:
                ctx.exclude(where, problem or "invalid box")
                continue
            regions.append(Region(label=categories[ann["category_id"]], instance=f"ann-{ann['id']}", box=box))
        ctx.add(path, regions=regions, size=size, grounded=True)


class NotPolygons(ValueError):
    """A `segmentation` that is not COCO polygons (the message says what it is)."""


def polygon_box(segmentation: object) -> Box:
    """The box of the vertices of COCO polygons `[[x1, y1, x2, y2, x3, y3, ...], ...]` (one object may have several
    parts), as the yolo layout boxes a segmentation line. Run-length masks (`{counts, size}`) are not decoded."""
    if isinstance(segmentation, dict):
        raise NotPolygons("is a run-length mask, which the coco layout does not decode")
    if not isinstance(segmentation, list) or not segmentation:
        raise NotPolygons(f"{segmentation!r} is not a list of polygons")
    vertices: list[float] = []
    for polygon in segmentation:
        if (not isinstance(polygon, list) or len(polygon) < 6 or len(polygon) % 2
                or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in polygon)):
            raise NotPolygons(f"holds {str(polygon)[:60]!r}, not a polygon of three or more [x, y] vertices")
        vertices.extend(float(v) for v in polygon)  # every part has an even length: x, y stay in step
    return vertices_box(vertices)
