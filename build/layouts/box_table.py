"""Boxes in a one-off JSON or CSV format, found through the field names the manifest maps
(BBBC041's `objects[].bounding_box.minimum.{r,c}`, RSNA pneumonia's `patientId,x,y,width,height,Target`),
in one table (its image named by one field or by a template of several, `{slide}/{roi}`) or in one box file per
image (NuCLS's `csv/<fov>.csv`), with or without a header line,
optionally keeping only the rows a `where` filter names."""
from __future__ import annotations

import csv
import json
import math
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from mmbu.build.layouts.boxes import clip_box, fractions_to_pixels
from mmbu.build.layouts.context import LayoutContext
from mmbu.build.layouts.files import image_size
from mmbu.build.layouts.label_table import ImageFinder, missing_columns, read_table, sniff_delimiter
from mmbu.build.layouts.pairing import paired_files
from mmbu.build.layouts.sample import Region
from mmbu.core import budget
from mmbu.core.boxes import Box, box_from_roles
from mmbu.curation.manifest.hints import did_you_mean
from mmbu.curation.manifest.layout_annotations import REST_OF_LINE, BoxTableLayout


WHITESPACE = r"\s+"  # `delimiter: whitespace`: runs of spaces and tabs (pandas' separator for them)


class FieldMissing(KeyError):
    """A dotted path that a record does not have; the message says which part and what is there."""

    def __str__(self) -> str:
        return str(self.args[0])


def field_value(record: Any, path: str) -> Any:
    """The value at a dotted path (`image.pathname`, `bbox.0`) of a JSON record."""
    node = record
    walked: list[str] = []
    for part in path.split(".") if path else []:
        if isinstance(node, Mapping) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            where = ".".join(walked) or "the record"
            choices = list(node) if isinstance(node, Mapping) else []
            raise FieldMissing(f"{where} has no field {part!r}{did_you_mean(part, choices)}")
        walked.append(part)
    return node


Objects = list[tuple[str, Any]]  # (instance, record or row) of one image


def read(layout: BoxTableLayout, ctx: LayoutContext) -> None:
    if layout.annotations is not None:
        for box_file, image in paired_files(ctx, layout.images or "", layout.annotations):
            objects = _file_objects(layout, ctx, box_file)
            if objects is not None:
                _add_image(layout, ctx, image, objects)
        return
    groups = _csv_groups(layout, ctx) if layout.table_format == "csv" else _json_groups(layout, ctx)
    images = ImageFinder(ctx, layout.image_root)
    for name, objects in groups:
        path, ambiguous = images.find(f"{name.lstrip('/')}{layout.image_suffix}")
        if ambiguous:
            ctx.exclude(name, ambiguous)
            continue
        _add_image(layout, ctx, path, objects)


def _add_image(layout: BoxTableLayout, ctx: LayoutContext, path: Path, objects: Objects) -> None:
    facts = ctx.facts(path)
    size = image_size(path, facts.dicom) if facts.is_file else None
    kept, left_out = [], 0
    for instance, obj in objects:
        try:
            if layout.keeps(lambda name: _get(obj, name)):
                kept.append((instance, obj))
            else:
                left_out += 1
        except FieldMissing as exc:
            ctx.exclude(f"{ctx.rel(path)}#{instance}", str(exc))
    if objects and not kept:
        if left_out:
            ctx.exclude(ctx.rel(path), f"none of its {left_out} boxes has {layout.where_text()}")
        return
    regions, said_empty = _regions(layout, ctx, path, size, kept)
    if not regions and said_empty:
        ctx.exclude(ctx.rel(path), f"the table marks this image as holding no object ({said_empty}); box "
                                   "questions need one")
        return
    ctx.add(path, regions=regions, size=size, grounded=True)


def _file_objects(layout: BoxTableLayout, ctx: LayoutContext, box_file: Path) -> Objects | None:
    """The rows of one image's box file, or None (with an exclusion) when it cannot be read or lists no box."""
    name = ctx.rel(box_file)
    if layout.columns is None:
        table = read_table(ctx, name, _separator(layout))
        if table is None or missing_columns(ctx, name, table, _csv_fields(layout)):
            return None
        rows = [(f"row-{number}", row) for number, row in enumerate(table.to_dict(orient="records"), start=2)]
    else:
        rows = list(_positional_rows(layout, ctx, box_file))
    if not rows:
        ctx.exclude(name, "the box file lists no box; box questions need one")
        return None
    return rows


def _positional_rows(layout: BoxTableLayout, ctx: LayoutContext, path: Path) -> Iterator[tuple[str, dict[str, str]]]:
    """`line-N` -> {column name: text} of a box file without a header; a line with another number of fields than
    `columns` names (fewer, when `columns` ends with '...') is an exclusion, blank lines are skipped."""
    name = ctx.rel(path)
    open_ended = layout.columns[-1] == REST_OF_LINE
    columns = layout.columns[:-1] if open_ended else layout.columns
    try:
        lines = path.read_text(encoding="utf-8-sig").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        ctx.exclude(name, f"the box file cannot be read ({exc})")
        return
    separator = sniff_delimiter("\n".join(lines[:20]), _separator(layout))
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        fields = line.split() if separator == WHITESPACE else next(csv.reader([line], delimiter=separator))
        if len(fields) < len(columns) or (len(fields) > len(columns) and not open_ended):
            at_least = "at least " if open_ended else ""
            ctx.exclude(f"{name}:{number}", f"the line has {len(fields)} fields but columns names {at_least}{len(columns)}")
            continue
        yield f"line-{number}", {column: value.strip() for column, value in zip(columns, fields) if column != "_"}


def _separator(layout: BoxTableLayout) -> str | None:
    return WHITESPACE if layout.delimiter == "whitespace" else layout.delimiter


def _csv_fields(layout: BoxTableLayout) -> list[str]:
    box_columns = [layout.box.list] if layout.box.list else list(layout.box.named.values())
    return [*layout.image_fields, *([layout.label] if layout.label else []), *box_columns,
            *layout.no_object, *layout.where]


def _json_groups(layout: BoxTableLayout, ctx: LayoutContext) -> Iterator[tuple[str, Objects]]:
    """One group per image, in order of first appearance: records naming the same image (JSON lines written one box
    per line) give one image with all their objects."""
    merged: dict[str, list] = {}
    for where, record in _json_records(layout, ctx):
        try:
            name = _image_name(layout, record)
            objects = _record_objects(layout, record)
        except (FieldMissing, ValueError) as exc:
            ctx.exclude(where, str(exc))
            continue
        if not name:
            ctx.exclude(where, f"the record has an empty image field ({' or '.join(layout.image_fields)})")
            continue
        merged.setdefault(name, []).extend(objects)
    for name, objects in merged.items():
        yield name, [(f"object-{index}", obj) for index, obj in enumerate(objects, start=1)]


def _json_records(layout: BoxTableLayout, ctx: LayoutContext) -> Iterator[tuple[str, object]]:
    """(where, record) for every record: the list at `records` of a JSON file, or each line of JSON lines (a line
    that is not JSON is one exclusion naming it; the others go on)."""
    try:
        data = budget.read_json_bytes(ctx.path(layout.table))
        if layout.table_format == "jsonl":
            lines = data.decode("utf-8").splitlines()
        else:
            records = field_value(json.loads(data), layout.records)
    except budget.OverBudget as exc:
        ctx.exclude(layout.table, str(exc))
        return
    except (OSError, UnicodeDecodeError, ValueError, FieldMissing) as exc:
        ctx.exclude(layout.table, f"the box table cannot be read ({exc})")
        return
    if layout.table_format == "jsonl":
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                yield f"{layout.table}:{number}", json.loads(line)
            except ValueError as exc:
                ctx.exclude(f"{layout.table}:{number}", f"line {number} is not a JSON record ({exc})")
        return
    if layout.keys:
        yield from _keyed_records(layout, ctx, records)
        return
    if not isinstance(records, list):
        ctx.exclude(layout.table, f"records {layout.records or '(top level)'!r} is not a list of records")
        return
    for number, record in enumerate(records):
        yield f"{layout.table}#record-{number}", record


def _keyed_records(layout: BoxTableLayout, ctx: LayoutContext, node: Any, found: tuple[str, ...] = ()
                   ) -> Iterator[tuple[str, Any]]:
    """(where, record) of a mapping nested one level per name in `keys`, each record given its keys as fields."""
    where = f"{layout.table}#{'/'.join(found) or layout.records or '(top level)'}"
    if len(found) == len(layout.keys):
        if isinstance(node, Mapping):
            yield where, {**node, **dict(zip(layout.keys, found))}
        else:
            ctx.exclude(where, f"the record is a {type(node).__name__}, not a mapping of fields")
        return
    if not isinstance(node, Mapping):
        ctx.exclude(where, f"keys {layout.keys} needs a mapping by {layout.keys[len(found)]!r} here; found a "
                           f"{type(node).__name__}")
        return
    for key, child in node.items():
        yield from _keyed_records(layout, ctx, child, (*found, str(key)))


def _record_objects(layout: BoxTableLayout, record: Any) -> list[Any]:
    """A record's objects: its list at `objects`, its parallel lists zipped (one field per list), or itself."""
    if layout.objects is None:
        return [record]
    paths = [layout.objects] if isinstance(layout.objects, str) else layout.objects
    lists = {path: field_value(record, path) for path in paths}
    for path, values in lists.items():
        if not isinstance(values, list):
            raise ValueError(f"{path!r} is not a list of objects")
    if isinstance(layout.objects, str):
        return lists[layout.objects]
    lengths = {path: len(values) for path, values in lists.items()}
    if len(set(lengths.values())) > 1:
        raise ValueError(f"the parallel lists differ in length ({', '.join(f'{k}: {v}' for k, v in lengths.items())})")
    return [dict(zip(lists, values)) for values in zip(*lists.values())]


def _csv_groups(layout: BoxTableLayout, ctx: LayoutContext) -> Iterator[tuple[str, Objects]]:
    if layout.columns is not None:
        rows = list(_positional_rows(layout, ctx, ctx.path(layout.table)))
    else:
        table = read_table(ctx, layout.table, _separator(layout))
        if table is None or missing_columns(ctx, layout.table, table, _csv_fields(layout)):
            return
        rows = [(f"row-{number}", row) for number, row in enumerate(table.to_dict(orient="records"), start=2)]
    groups: dict[str, Objects] = {}
    for instance, row in rows:
        name = _image_name(layout, row)
        if not name:
            ctx.exclude(f"{layout.table}:{instance.split('-')[1]}",
                        f"the row has an empty image field ({' or '.join(layout.image_fields)})")
            continue
        groups.setdefault(name, []).append((instance, row))
    yield from groups.items()


def _image_name(layout: BoxTableLayout, obj: Any) -> str:
    """The image a row (record) names: its `image` field, or the template filled from its fields; '' when a field
    it needs is empty."""
    if layout.image_template is None:
        return str(_get(obj, layout.image)).strip()
    parts = {name: str(_get(obj, name)).strip() for name in layout.image_template.names}
    return layout.image_template.fill(parts) if all(parts.values()) else ""


def _regions(layout: BoxTableLayout, ctx: LayoutContext, path: Path, size: tuple[int, int] | None,
             objects: Objects) -> tuple[list[Region], str | None]:
    """The image's boxed objects, and why the table says it has none (when it does)."""
    regions: list[Region] = []
    said_empty = None
    for instance, obj in objects:
        where = f"{ctx.rel(path)}#{instance}"
        marked = _marked_empty(layout, obj)
        try:
            numbers = _box_numbers(layout, obj)
        except (FieldMissing, ValueError) as exc:
            ctx.exclude(where, str(exc))
            continue
        if marked or numbers is None:
            said_empty = marked or "its box fields are empty"
            continue
        try:
            label = str(field_value(obj, layout.label)).strip() if layout.label else layout.fixed_label
        except FieldMissing as exc:
            ctx.exclude(where, str(exc))
            continue
        if layout.units == "fractions" and size is None:
            ctx.exclude(where, "the image size cannot be read, so a box in fractions of it cannot be placed")
            continue
        box, problem = clip_box(_to_pixels(layout, numbers, size), size)
        if box is None:
            ctx.exclude(where, problem or "invalid box")
            continue
        regions.append(Region(label=label, instance=instance, box=box))
    return regions, said_empty


def _marked_empty(layout: BoxTableLayout, obj: Any) -> str | None:
    for name, values in layout.no_object.items():
        try:
            value = str(_get(obj, name)).strip()
        except FieldMissing:
            continue
        if value in values:
            return f"{name} = {value!r}"
    return None


def _box_numbers(layout: BoxTableLayout, obj: Any) -> dict[str, float] | None:
    """Role -> number; None when every box field is empty (a row meaning 'no object')."""
    if layout.box.list:
        raw = _get(obj, layout.box.list)
        if _empty(raw):
            return None
        values = json.loads(raw) if isinstance(raw, str) else raw
        if not isinstance(values, list) or len(values) != 4:
            raise ValueError(f"{layout.box.list} holds {raw!r}, not a list of four numbers")
        pairs = dict(zip(layout.box.order, values))
    else:
        pairs = {role: _get(obj, name) for role, name in layout.box.named.items()}
    if all(_empty(v) for v in pairs.values()):
        return None
    if any(_empty(v) for v in pairs.values()):
        raise ValueError(f"the box is incomplete: {', '.join(f'{k}={v!r}' for k, v in pairs.items())}")
    try:
        numbers = {role: float(value) for role, value in pairs.items()}
    except (TypeError, ValueError):
        raise ValueError(f"the box values {pairs} are not numbers") from None
    if not all(math.isfinite(v) for v in numbers.values()):
        raise ValueError(f"the box values {pairs} are not finite numbers")
    return numbers


def _get(obj: Any, name: str) -> Any:
    # a CSV row is a flat mapping whose column names may contain dots; JSON records are walked
    return obj[name] if isinstance(obj, dict) and name in obj else field_value(obj, name)


def _empty(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value)) or str(value).strip() == ""


def _to_pixels(layout: BoxTableLayout, numbers: dict[str, float], size: tuple[int, int] | None) -> Box:
    x1, y1, x2, y2 = box_from_roles(numbers)
    if "x2" in numbers and layout.max_corner == "inclusive":
        x2, y2 = x2 + 1, y2 + 1
    return fractions_to_pixels((x1, y1, x2, y2), size) if layout.units == "fractions" else (x1, y1, x2, y2)
