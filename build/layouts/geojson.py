"""GeoJSON annotation files (RFC 7946 Features with Polygon or MultiPolygon geometries) read as shapes.

Two conventions for y are in use: QuPath, which exports PUMA's annotations, writes pixel coordinates of
the image with y growing downwards (what every other polygon format here uses), while Kaibu/ImJoy, which
wrote HPA's `annotation.json`, counts y from the bottom edge (torch-em's HPA loader draws row
`height - y`). The layout's `y_axis` says which; `up` is turned into rows here, given the image height.

A Polygon's first ring is its outline and the others are holes; a MultiPolygon is one object made of
several polygons. Points, lines and empty geometries are not areas and are reported, never drawn.
"""
from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from mmbu.core import budget

Point = tuple[float, float]
Polygon = tuple[list[Point], tuple[list[Point], ...]]  # (outline, holes)


class GeoJsonError(ValueError):
    """A file that is not GeoJSON; the message is one sentence."""


def read_features(path: Path) -> list[Any]:
    """The features of a FeatureCollection, a list of Features (older QuPath exports) or one Feature."""
    try:
        document = json.loads(budget.read_json_bytes(path))
    except budget.OverBudget as exc:
        raise GeoJsonError(str(exc)) from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise GeoJsonError(f"not a readable JSON file ({type(exc).__name__}: {exc})") from None
    if isinstance(document, list):
        return document
    if isinstance(document, Mapping) and document.get("type") == "FeatureCollection":
        features = document.get("features")
        if isinstance(features, list):
            return features
    if isinstance(document, Mapping) and document.get("type") == "Feature":
        return [document]
    raise GeoJsonError("not GeoJSON: expected a FeatureCollection with a features list, a list of Features or a "
                       "Feature")


def feature_key(feature: Any, number: int) -> str:
    """A stable key of the object inside its file: the Feature's `id` (QuPath writes a UUID), else its position."""
    found = feature.get("id") if isinstance(feature, Mapping) else None
    return f"feature-{found}" if isinstance(found, (str, int)) and str(found) else f"feature-{number}"


def feature_label(feature: Any, dotted: str) -> str | None:
    """The text at a dotted path of the Feature's `properties` (PUMA: `classification.name`), or None."""
    node: Any = feature.get("properties") if isinstance(feature, Mapping) else None
    for step in dotted.split("."):
        if not isinstance(node, Mapping) or step not in node:
            return None
        node = node[step]
    return str(node).strip() if isinstance(node, (str, int, float)) and str(node).strip() else None


def feature_polygons(feature: Any, height: int, y_up: bool) -> list[Polygon]:
    """The polygons of one Feature in image pixel coordinates (x right, y down); ValueError says why none."""
    geometry = feature.get("geometry") if isinstance(feature, Mapping) else None
    if not isinstance(geometry, Mapping):
        raise ValueError("the feature has no geometry")
    kind, coordinates = geometry.get("type"), geometry.get("coordinates")
    if kind == "Polygon":
        polygons = [coordinates]
    elif kind == "MultiPolygon":
        polygons = coordinates if isinstance(coordinates, list) else None
    else:
        raise ValueError(f"a {kind} geometry is not an area (Polygon or MultiPolygon)")
    if not polygons or not all(isinstance(rings, list) and rings for rings in polygons):
        raise ValueError(f"the {kind} has no coordinates")
    return [_polygon(rings, height, y_up) for rings in polygons]


def _polygon(rings: list[Any], height: int, y_up: bool) -> Polygon:
    outline, *holes = (list(_ring(ring, height, y_up)) for ring in rings)
    if len(outline) < 3:
        raise ValueError(f"a polygon needs at least three points; this one has {len(outline)}")
    return outline, tuple(hole for hole in holes if len(hole) >= 3)


def _ring(ring: Any, height: int, y_up: bool) -> Iterator[Point]:
    if not isinstance(ring, list):
        raise ValueError("a ring is not a list of positions")
    points = []
    for position in ring:
        try:
            x, y = float(position[0]), float(position[1])
        except (TypeError, ValueError, IndexError):
            raise ValueError(f"position {position!r} is not [x, y] numbers") from None
        points.append((x, height - y if y_up else y))
    if len(points) > 1 and points[0] == points[-1]:
        points.pop()  # GeoJSON closes each ring by repeating its first position
    yield from points
