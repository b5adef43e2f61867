"""A table naming one volume per row (a DICOM series folder, a SeriesInstanceUID, a NIfTI or DICOM file)
and its label; each volume is one sample (for a series: the slice the manifest picks)."""
from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

from mmbu.build.layouts.context import LayoutContext
from mmbu.build.layouts.files import is_dicom
from mmbu.build.layouts.label_table import missing_columns, read_table, row_label
from mmbu.curation.manifest.layout_volumes import VolumeTableLayout

SERIES_TAGS = ["SeriesInstanceUID", "ImagePositionPatient", "ImageOrientationPatient", "InstanceNumber"]


def read(layout: VolumeTableLayout, ctx: LayoutContext) -> None:
    table = read_table(ctx, layout.table, layout.delimiter)
    if table is None:
        return
    label_columns = layout.label_columns or [layout.label_column]
    if missing_columns(ctx, layout.table, table, [*layout.volume_columns, *label_columns,
                                                  *layout.metadata_columns.values()]):
        return
    by_uid = _series_index(ctx, layout.volumes_root) if layout.series_column else {}
    for number, row in enumerate(table.itertuples(index=False, name=None), start=2):
        record = {str(k): str(v).strip() for k, v in zip(table.columns, row)}
        where = f"{layout.table}:{number}"
        label, problem = row_label(layout, record)
        if problem:
            ctx.exclude(where, problem)
            continue
        row_metadata = {field: record[column] for field, column in layout.metadata_columns.items() if record[column]}
        if layout.series_column:
            files = by_uid.get(record[layout.series_column], [])
            if not files:
                ctx.exclude(where, f"no DICOM file under {layout.volumes_root!r} belongs to series "
                                   f"{record[layout.series_column]!r}")
                continue
            _add_series(ctx, files, f"series={record[layout.series_column]}", label, row_metadata)
            continue
        try:
            path = ctx.path(layout.volume.format(**record))
        except (KeyError, IndexError, ValueError) as exc:
            ctx.exclude(where, f"the volume path {layout.volume!r} cannot be made from this row ({exc})")
            continue
        if path.is_dir():
            _add_folder(ctx, path, where, label, row_metadata)
        else:
            ctx.add(path, label=label, row_metadata=row_metadata)  # a NIfTI or DICOM file; missing ones reported


def _headers(path: Path) -> dict | None:
    import pydicom

    try:
        ds = pydicom.dcmread(path, stop_before_pixels=True, specific_tags=SERIES_TAGS)
    except Exception:  # noqa: BLE001 - a damaged file is not a slice; the series is read without it
        return None
    return {"uid": str(ds.get("SeriesInstanceUID", "")), "position": ds.get("ImagePositionPatient"),
            "orientation": ds.get("ImageOrientationPatient"), "number": ds.get("InstanceNumber")}


def _series_index(ctx: LayoutContext, root: str) -> dict[str, list[tuple[Path, dict]]]:
    index: dict[str, list[tuple[Path, dict]]] = defaultdict(list)
    for path in ctx.files_under(ctx.path(root)):
        if is_dicom(path):
            headers = _headers(path)
            if headers and headers["uid"]:
                index[headers["uid"]].append((path, headers))
    return index


def _add_folder(ctx: LayoutContext, folder: Path, where: str, label: str | None, row_metadata: dict) -> None:
    slices = [(p, h) for p in sorted(folder.iterdir()) if p.is_file() and is_dicom(p) and (h := _headers(p))]
    series = {h["uid"] for _, h in slices}
    if not slices:
        ctx.exclude(ctx.rel(folder), f"the folder named by {where} holds no DICOM file")
        return
    if len(series) > 1:
        ctx.exclude(ctx.rel(folder), f"the folder holds {len(series)} DICOM series; name one by its "
                                     "SeriesInstanceUID (layout.series_column)")
        return
    _add_series(ctx, slices, None, label, row_metadata, source=folder)


def _add_series(ctx: LayoutContext, slices: list[tuple[Path, dict]], key: str | None, label: str | None,
                row_metadata: dict, source: Path | None = None) -> None:
    ordered, how = _ordered(slices)
    choice = ctx.manifest.convert.slice
    index = (min(max(choice, 0), len(ordered) - 1) if isinstance(choice, int) else len(ordered) // 2)
    chosen = ordered[index]
    series_id = key or ctx.rel(source)
    ctx.add(chosen, label=label, row_metadata=row_metadata, source=series_id, part=f"series-slice={choice}",
            companions=tuple(p for p in ordered if p != chosen),
            provenance={"series": f"{len(ordered)} slices ordered by {how}; slice {index} ({chosen.name}) converted"})


def _ordered(slices: list[tuple[Path, dict]]) -> tuple[list[Path], str]:
    """Slices from one end of the volume to the other, and what they were ordered by."""
    import numpy as np

    if all(h["position"] is not None and h["orientation"] is not None for _, h in slices):
        def along_normal(item: tuple[Path, dict]) -> float:
            row, col = np.array(item[1]["orientation"][:3], float), np.array(item[1]["orientation"][3:], float)
            return float(np.dot(np.array(item[1]["position"], float), np.cross(row, col)))

        return [p for p, _ in sorted(slices, key=along_normal)], "ImagePositionPatient along the slice normal"
    if all(h["number"] is not None for _, h in slices):
        return [p for p, _ in sorted(slices, key=lambda item: int(item[1]["number"]))], "InstanceNumber"
    return [p for p, _ in sorted(slices, key=lambda item: _natural(item[0].name))], "file name"


def _natural(name: str) -> list:
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]
