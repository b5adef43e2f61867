"""A CSV/TSV table with one row per image (and optional per-sample metadata columns)."""
from __future__ import annotations

import csv

import pandas as pd

from mmbu.build.layouts.context import LayoutContext
from mmbu.curation.manifest.layout import LabelTableLayout


def _delimiter(sample: str, given: str | None) -> str:
    if given:
        return given
    try:
        return csv.Sniffer().sniff(sample, delimiters=",\t;").delimiter
    except csv.Error:
        return ","


def read(layout: LabelTableLayout, ctx: LayoutContext) -> None:
    table_path = ctx.path(layout.table)
    try:
        head = table_path.read_text(encoding="utf-8-sig")[:8192]
        table = pd.read_csv(table_path, sep=_delimiter(head, layout.delimiter), dtype=str,
                            keep_default_na=False, encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError, pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        ctx.exclude(layout.table, f"the label table cannot be read ({exc})")
        return
    wanted = [layout.image_column, layout.label_column, *layout.metadata_columns.values()]
    missing = [c for c in wanted if c not in table.columns]
    if missing:
        ctx.exclude(layout.table, f"the label table has no column(s) {', '.join(map(repr, missing))} "
                                  f"(columns: {', '.join(map(str, table.columns))})")
        return
    image_root = ctx.path(layout.image_root)
    for number, row in enumerate(table.itertuples(index=False, name=None), start=2):  # line 1 is the header
        record = dict(zip(table.columns, row))
        name, label = record[layout.image_column].strip(), record[layout.label_column].strip()
        if not name:
            ctx.exclude(f"{layout.table}:{number}", "the row has an empty image column")
            continue
        row_metadata = {field: record[column].strip() for field, column in layout.metadata_columns.items()
                        if record[column].strip()}
        ctx.add(image_root / f"{name}{layout.image_suffix}", label=label, row_metadata=row_metadata)
