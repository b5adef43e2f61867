"""A CSV/TSV table with one row per image: one label column, a `|`-joined column or one-hot columns; `where`
keeps only the rows whose columns hold the listed values."""
from __future__ import annotations

import csv
import zipfile
from pathlib import Path

import pandas as pd

from mmbu.build.layouts.context import LayoutContext
from mmbu.build.layouts.single_label import one_hot_label, one_label, split_labels
from mmbu.curation.manifest.hints import did_you_mean
from mmbu.curation.manifest.layout import EXCEL_SUFFIXES, LabelTableLayout


def sniff_delimiter(sample: str, given: str | None) -> str:
    """`given`, else the delimiter (comma, tab or semicolon) csv.Sniffer finds in `sample`, else a comma."""
    if given:
        return given
    try:
        return csv.Sniffer().sniff(sample, delimiters=",\t;").delimiter
    except csv.Error:
        return ","


def read_table(ctx: LayoutContext, name: str, delimiter: str | None = None, sheet: str | None = None
               ) -> pd.DataFrame | None:
    """A CSV/TSV or Excel sheet of text cells (nothing parsed as numbers or NaN), or None with an exclusion."""
    path = ctx.path(name)
    if name.lower().endswith(EXCEL_SUFFIXES):
        return _read_sheet(ctx, name, path, sheet)
    try:
        head = path.read_text(encoding="utf-8-sig")[:8192]
        return pd.read_csv(path, sep=sniff_delimiter(head, delimiter), dtype=str, keep_default_na=False,
                           encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError, pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        ctx.exclude(name, f"the table cannot be read ({exc})")
        return None


def _read_sheet(ctx: LayoutContext, name: str, path: Path, sheet: str | None) -> pd.DataFrame | None:
    """One sheet of a workbook, every cell as text: openpyxl gives whole numbers as ints, so a label 1 reads '1'."""
    try:
        with pd.ExcelFile(path, engine="openpyxl") as workbook:
            if sheet is not None and sheet not in workbook.sheet_names:
                ctx.exclude(name, f"the workbook has no sheet {sheet!r}{did_you_mean(sheet, workbook.sheet_names)} "
                                  f"(its sheets: {', '.join(map(repr, workbook.sheet_names))})")
                return None
            table = pd.read_excel(workbook, sheet_name=sheet if sheet is not None else 0, dtype=str,
                                  keep_default_na=False, na_filter=False)
    except (OSError, ValueError, KeyError, zipfile.BadZipFile) as exc:
        ctx.exclude(name, f"the workbook cannot be read ({exc})")
        return None
    table.columns = [str(column) for column in table.columns]  # a header cell may be a number
    return table


def missing_columns(ctx: LayoutContext, name: str, table: pd.DataFrame, wanted: list[str]) -> bool:
    """Exclude the table (True) when a column the layout names is not in it, with the closest names."""
    missing = [c for c in dict.fromkeys(wanted) if c not in table.columns]
    if missing:
        ctx.exclude(name, "; ".join(f"the table has no column {c!r}{did_you_mean(c, table.columns)}" for c in missing))
        return True
    return False


class ImageFinder:
    """Image paths from a table's values: under one folder, or found by file name under a glob of folders."""

    def __init__(self, ctx: LayoutContext, image_root: str) -> None:
        self.root = ctx.path(image_root)
        self._by_name: dict[str, list[Path]] | None = None
        if any(ch in image_root for ch in "*?["):
            self._by_name = {}
            for folder in sorted(ctx.raw_dir.glob(image_root)):
                for path in ctx.files_under(folder) if folder.is_dir() else []:
                    self._by_name.setdefault(path.relative_to(folder).as_posix(), []).append(path)

    def find(self, name: str) -> tuple[Path, str | None]:
        """The path for `name` and, when found in several folders, why it is ambiguous."""
        if self._by_name is None:
            return self.root / name, None
        found = self._by_name.get(name, [])
        if len(found) > 1:
            return found[0], f"{name!r} is in {len(found)} of the image folders; the image is ambiguous"
        return (found[0], None) if found else (self.root / name, None)


def read(layout: LabelTableLayout, ctx: LayoutContext) -> None:
    table = read_table(ctx, layout.table, layout.delimiter, layout.sheet)
    if table is None:
        return
    label_columns = layout.label_columns or [layout.label_column]
    frame_columns = [layout.frame_column] if layout.frame_column else []
    if missing_columns(ctx, layout.table, table, [layout.image_column, *label_columns, *frame_columns,
                                                  *layout.metadata_columns.values(), *layout.where]):
        return
    images = ImageFinder(ctx, layout.image_root)
    for number, row in enumerate(table.itertuples(index=False, name=None), start=2):  # line 1 is the header
        record = dict(zip(table.columns, row))
        name = record[layout.image_column].strip()
        if left_out := layout.left_out_by(record.get):
            # named by its line: another row may keep the same image (one row per frame or attribute)
            ctx.exclude(f"{layout.table}:{number}", f"the row of {name or 'no image'!r} is not read: {left_out}")
            continue
        if not name:
            ctx.exclude(f"{layout.table}:{number}", "the row has an empty image column")
            continue
        path, ambiguous = images.find(f"{name}{layout.image_suffix}")
        if ambiguous:
            ctx.exclude(f"{layout.table}:{number}", ambiguous)
            continue
        label, problem = row_label(layout, record)
        if problem:
            ctx.exclude(ctx.rel(path) if path.exists() else f"{layout.table}:{number}", problem)
            continue
        row_metadata = {field: record[column].strip() for field, column in layout.metadata_columns.items()
                        if record[column].strip()}
        frame = record[layout.frame_column].strip() if layout.frame_column else None
        if frame is not None and not frame.isdigit():
            ctx.exclude(f"{layout.table}:{number}", f"the frame column {layout.frame_column!r} holds {frame!r}, "
                                                    "not a 0-based frame index")
            continue
        ctx.add(path, label=label, row_metadata=row_metadata, video_frame=int(frame) if frame is not None else None)


def row_label(layout: LabelTableLayout, record: dict[str, str]) -> tuple[str | None, str | None]:
    """The row's one raw label, or the reason it has none."""
    if layout.label_columns:
        return one_hot_label([(c, record[c].strip()) for c in layout.label_columns], layout.positive_values,
                             layout.negative_values, layout.no_finding)
    cell = record[layout.label_column].strip()
    if layout.label_separator:
        return one_label(split_labels(cell, layout.label_separator), layout.no_finding)
    return one_label([cell] if cell else [], layout.no_finding)
