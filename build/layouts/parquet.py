"""Parquet and Arrow tables with embedded images (Hugging Face dataset repositories, `datasets` `save_to_disk`
folders): one sample per row.

Rows are read a batch at a time (see `table_files`), never a whole file. The
image cell's encoded bytes are written as they are into the layout cache (see `derived`); the sample id
is the file plus the row number, so it is the same on every rebuild of the same file.
"""
from __future__ import annotations

import io
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from PIL import Image

from mmbu.build.layouts.boxes import clip_box, fractions_to_pixels, ordered_box
from mmbu.build.layouts.context import LayoutContext
from mmbu.build.layouts.masks import MaskRules, regions_from_mask
from mmbu.build.layouts.sample import Region
from mmbu.build.layouts.single_label import one_label
from mmbu.build.layouts.splits import keep_splits
from mmbu.build.layouts.table_cells import CellProblem, cell_image
from mmbu.build.layouts.table_files import TableFile, TableFileError
from mmbu.core import budget
from mmbu.core.yaml_io import describe_yaml_error, parse_front_matter
from mmbu.curation.manifest.hints import did_you_mean
from mmbu.curation.manifest.layout_tables import ParquetLayout
from mmbu.curation.manifest.templates import PathTemplate

BATCH_ROWS = 64  # rows of images held at once
BOX_FORMATS = {"xywh": ("x1", "y1", "width", "height"), "xyxy": ("x1", "y1", "x2", "y2"),
               "cxcywh": ("cx", "cy", "width", "height")}  # box_format -> roles of the numbers


class RowProblem(ValueError):
    """One row (or one object in it) that cannot be used; the message is one sentence."""


def read(layout: ParquetLayout, ctx: LayoutContext) -> None:
    files = list(PathTemplate(layout.files).scan(ctx.raw_dir))
    if not files:
        ctx.exclude(layout.files, f"no Parquet or Arrow file matches {layout.files!r}")
        return
    files = keep_splits(ctx, layout.splits, layout.files, "files", files, lambda item: item[1])
    names = _LabelNames(layout, ctx)
    columns = list(dict.fromkeys(c for c in (layout.image_column, layout.label_column, layout.mask_column,
                                             layout.objects_column, *layout.metadata_columns.values(), *layout.where)
                                 if c))
    for path, _ in files:
        try:
            table = TableFile(path)
        except TableFileError as exc:
            ctx.exclude(ctx.rel(path), str(exc))
            continue
        with table:
            present = table.schema.names
            missing = [c for c in columns if c not in present]
            if missing:
                ctx.exclude(ctx.rel(path), "; ".join(f"the table has no column {c!r}{did_you_mean(c, present)}"
                                                     for c in missing))
                continue
            names.learn_from_schema(table.schema)
            try:
                for number, row in enumerate(table.rows(columns, BATCH_ROWS)):
                    if layout.keeps(row.__getitem__):
                        _add_row(layout, ctx, names, path, number, row)
            except TableFileError as exc:  # the rows read before the damage stay samples
                ctx.exclude(ctx.rel(path), str(exc))


def _add_row(layout: ParquetLayout, ctx: LayoutContext, names: "_LabelNames", path: Path, number: int,
             row: dict[str, Any]) -> None:
    part = f"row={number}"
    item = f"{ctx.rel(path)}#{part}"
    try:
        image = _cell(layout, ctx, row, layout.image_column, layout.image_encoding)
        label = _label(layout, names, row[layout.label_column]) if layout.label_column else None
        size = None
        if layout.mask_column or layout.objects_column:
            size = _size(image)
        mask, regions, problems = _mask_regions(layout, ctx, row, size) if layout.mask_column else (None, [], [])
        if layout.objects_column:
            boxed, box_problems = _object_regions(layout, names, row[layout.objects_column], size)
            regions += boxed
            problems += box_problems
    except RowProblem as exc:
        ctx.exclude(item, str(exc))
        return
    for instance, reason in problems:
        ctx.exclude(f"{item}#{instance}", reason)
    row_metadata = {field: _text(row[column]) for field, column in layout.metadata_columns.items()
                    if _text(row[column])}
    provenance = {"row": f"{ctx.rel(path)} row {number}"}
    grounded = layout.label_column is None
    if isinstance(image, Path):  # the cell names a file of the dataset: that file is the sample
        mask_path = ctx.store_mask(image, mask, [path]) if mask is not None else None
        ctx.add(image, label=label, regions=regions, mask_path=mask_path, row_metadata=row_metadata, size=size,
                grounded=grounded, provenance=provenance)
        return
    ctx.add_derived(path, part, lambda: image, label=label, regions=regions, mask=mask, row_metadata=row_metadata,
                    grounded=grounded, provenance=provenance)


def _cell(layout: ParquetLayout, ctx: LayoutContext, row: dict[str, Any], column: str, encoding: str) -> bytes | Path:
    try:
        return cell_image(row[column], column, encoding, ctx.raw_dir, layout.image_root)
    except CellProblem as exc:
        raise RowProblem(str(exc)) from None


def _size(image: bytes | Path) -> tuple[int, int]:
    try:
        with Image.open(image if isinstance(image, Path) else io.BytesIO(image)) as opened:
            return opened.size
    except Exception as exc:  # noqa: BLE001 - Pillow raises several types for bytes that are not an image
        raise RowProblem(f"the image cannot be opened ({type(exc).__name__})") from None


def _text(value: Any) -> str:
    return "" if value is None else str(value).strip()


def _label(layout: ParquetLayout, names: "_LabelNames", value: Any) -> str:
    values = value if isinstance(value, list) else [value]
    raw = [names.name(layout.label_column, v, layout.class_names) for v in values if v is not None]
    label, reason = one_label(raw, layout.no_finding)
    if reason:
        raise RowProblem(reason)
    return label


def _mask_regions(layout: ParquetLayout, ctx: LayoutContext, row: dict[str, Any], size: tuple[int, int] | None
                  ) -> tuple[np.ndarray, list[Region], list[tuple[str, str]]]:
    cell = _cell(layout, ctx, row, layout.mask_column, "auto")
    with Image.open(cell if isinstance(cell, Path) else io.BytesIO(cell)) as image:
        try:
            budget.check_plane(f"the {layout.mask_column} cell", *image.size, channels=len(image.getbands()),
                               kind="mask")
        except budget.OverBudget as exc:
            raise RowProblem(str(exc)) from None
        mask = np.asarray(image)
    if mask.ndim == 3:
        if not all(np.array_equal(mask[..., 0], mask[..., c]) for c in range(1, min(3, mask.shape[-1]))):
            raise RowProblem("the mask has colour channels that differ; a label mask has one value per pixel")
        mask = mask[..., 0]
    if size is not None and (mask.shape[1], mask.shape[0]) != size:
        raise RowProblem(f"the mask is {mask.shape[1]}x{mask.shape[0]} but its image is {size[0]}x{size[1]}")
    rules = MaskRules(labels=dict(layout.mask_values), background=layout.background, instances=layout.instances,
                      instance_label=layout.instance_label, min_region_pixels=layout.min_region_pixels)
    try:
        return mask, regions_from_mask(mask, rules, f"the {layout.mask_column} cell"), []
    except budget.OverBudget as exc:
        raise RowProblem(str(exc)) from None


def _object_regions(layout: ParquetLayout, names: "_LabelNames", objects: Any, size: tuple[int, int] | None
                    ) -> tuple[list[Region], list[tuple[str, str]]]:
    if not isinstance(objects, Mapping):
        raise RowProblem(f"the {layout.objects_column} cell is not a struct of {layout.box_field} and "
                         f"{layout.category_field} lists")
    boxes, categories = objects.get(layout.box_field), objects.get(layout.category_field)
    if not isinstance(boxes, list) or not isinstance(categories, list) or len(boxes) != len(categories):
        raise RowProblem(f"the {layout.objects_column} cell has no {layout.box_field} and {layout.category_field} "
                         "lists of the same length")
    regions, problems = [], []
    for index, (box, category) in enumerate(zip(boxes, categories), start=1):
        instance = f"object-{index}"
        try:
            label = names.name(f"{layout.objects_column}.{layout.category_field}", category,
                               layout.object_class_names)
            pixels = ordered_box(box, BOX_FORMATS[layout.box_format])
        except RowProblem as exc:
            problems.append((instance, str(exc)))
            continue
        except (TypeError, ValueError):
            problems.append((instance, f"box {box!r} is not four numbers"))
            continue
        if layout.box_units == "fractions" and size is not None:
            pixels = fractions_to_pixels(pixels, size)
        clipped, reason = clip_box(pixels, size)
        if clipped is None:
            problems.append((instance, reason or "invalid box"))
            continue
        regions.append(Region(label=label, instance=instance, box=clipped))
    return regions, problems


class _LabelNames:
    """Class index -> raw label, from the manifest, else the dataset card, else the file's stored features."""

    def __init__(self, layout: ParquetLayout, ctx: LayoutContext) -> None:
        self._card: dict[str, list[str]] = _card_class_labels(ctx, layout.card, layout.config_name)
        self._schema: dict[str, list[str]] = {}

    def learn_from_schema(self, schema: Any) -> None:
        """The ClassLabel names `datasets` stores in a Parquet file's schema metadata (its `huggingface` key)."""
        if self._schema or not schema.metadata or b"huggingface" not in schema.metadata:
            return
        from datasets import Features

        try:
            features = Features.from_arrow_schema(schema)
        except Exception:  # noqa: BLE001 - metadata from another writer: the card or the manifest decide
            return
        self._schema = _stored_class_labels(features.to_dict())

    def name(self, column: str, value: Any, given: list[str] | None) -> str:
        if isinstance(value, str):
            return value.strip()
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not float(value).is_integer():
            raise RowProblem(f"label value {value!r} in {column} is not a class index or a text label")
        index = int(value)
        names = given or self._card.get(column) or self._schema.get(column)
        if names is None:
            return str(index)
        if not 0 <= index < len(names):
            raise RowProblem(f"label index {index} in {column} is outside its class names (0..{len(names) - 1})")
        return names[index]


def _card_class_labels(ctx: LayoutContext, card: str | None, config_name: str | None) -> dict[str, list[str]]:
    """Column (dotted for nested features) -> ClassLabel names, from the card's YAML `dataset_info`."""
    if card is None or not ctx.path(card).is_file():
        return {}
    try:  # the card's header through the toolkit's YAML loader (huggingface_hub's has no guard against alias bombs)
        data = parse_front_matter(ctx.path(card).read_text(encoding="utf-8"), card) or {}
        if not isinstance(data, dict):
            raise ValueError("the header is not a mapping")
    except (OSError, UnicodeDecodeError, ValueError, yaml.YAMLError) as exc:
        # a broken card is reported; the manifest may still name the classes
        reason = describe_yaml_error(exc) if isinstance(exc, yaml.YAMLError) else str(exc)
        ctx.exclude(card, f"the dataset card's YAML header cannot be read ({reason})")
        return {}
    info = data.get("dataset_info") or {}
    if isinstance(info, list):
        info = next((entry for entry in info if entry.get("config_name") in (config_name, None if config_name
                     else "default")), info[0] if info else {})
    return _class_labels_of({"features": info.get("features") or []})


def _class_labels_of(node: Any, prefix: str = "") -> dict[str, list[str]]:
    """Column (dotted for nested features) -> ClassLabel names, from a card's YAML `features` list:
    entries `{name, dtype: {class_label: {names}}}`, nested under `sequence`, `list` or `struct`."""
    found: dict[str, list[str]] = {}
    entries = node.get("features") if isinstance(node, Mapping) else node
    for entry in entries if isinstance(entries, list) else []:
        if not isinstance(entry, Mapping) or "name" not in entry:
            continue
        name = f"{prefix}{entry['name']}"
        for key in ("dtype", "sequence", "list", "struct"):
            inner = entry.get(key)
            if isinstance(inner, list):  # a struct: its fields are entries again
                found.update(_class_labels_of(inner, prefix=f"{name}."))
            elif isinstance(inner, Mapping) and "class_label" in inner:
                found[name] = _names(inner["class_label"].get("names"))
            elif isinstance(inner, Mapping) and isinstance(inner.get("dtype"), Mapping):
                found.update(_class_labels_of([{"name": entry["name"], **inner}], prefix))
    return {k: v for k, v in found.items() if v}


def _stored_class_labels(feature: Any, name: str = "") -> dict[str, list[str]]:
    """The same from `datasets.Features.to_dict()` (what `datasets` stores in the file's schema metadata):
    `{"_type": "ClassLabel", "names": [...]}`, lists as `{"_type": "List", "feature": ...}`, structs as dicts."""
    if not isinstance(feature, Mapping):
        return {}
    kind = feature.get("_type")
    if kind == "ClassLabel":
        return {name: _names(feature.get("names"))}
    if kind in ("List", "Sequence", "LargeList"):
        return _stored_class_labels(feature.get("feature"), name)
    if kind is None:  # a struct (or the top level): field name -> feature
        found: dict[str, list[str]] = {}
        for key, inner in feature.items():
            found.update(_stored_class_labels(inner, f"{name}.{key}" if name else str(key)))
        return found
    return {}


def _names(names: Any) -> list[str]:
    if isinstance(names, Mapping):  # the card writes {'0': name, '1': name}
        return [str(names[k]) for k in sorted(names, key=lambda k: int(k))]
    return [str(n) for n in names or []]
