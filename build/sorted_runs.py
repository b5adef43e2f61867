"""Sorting rows larger than memory: sorted runs on disk, merged a batch at a time (an external merge sort).

The rows step writes each chunk of rows it makes as a run sorted by task and sample id, then merges the runs
into rows.parquet; the release merges the datasets' rows files of one config by sample id. Both merge with
`merge_sorted`, whose output is the order of a stable sort of the streams concatenated, so the files are
those a sort of every row in memory would give, while memory holds about one batch per stream.
"""
from __future__ import annotations

import shutil
import tempfile
from bisect import bisect_left
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

SORTED_BY = b"mmbu.sorted_by"  # schema metadata of a file merged here: the keys its rows are in order of
MERGE_BATCH_ROWS = 1024  # rows read from each stream at a time
MERGE_WIDTH = 32  # runs merged at once; more are merged in rounds, so memory holds at most this many batches


class _Cursor:
    """One sorted stream's unread rows: its current batch (plus rows tied with its last key) and their keys."""

    def __init__(self, tables: Iterator[pa.Table], keys: Sequence[str]) -> None:
        self.tables, self.key_names = tables, keys
        self.table: pa.Table | None = None
        self.keys: list[tuple] = []
        self.exhausted = False
        self.fill()

    def fill(self) -> None:
        """Append the stream's next non-empty table (or mark the stream exhausted)."""
        for table in self.tables:
            if table.num_rows:
                # an emptied slice still points at its batch's buffers: dropped, never concatenated
                self.table = pa.concat_tables([self.table, table]) if self.keys else table
                self.keys += zip(*(table.column(name).to_pylist() for name in self.key_names))
                return
        self.exhausted = True

    def take(self, count: int) -> pa.Table:
        taken, self.table = self.table.slice(0, count), self.table.slice(count)
        del self.keys[:count]
        return taken


def merge_sorted(streams: Sequence[Iterable[pa.Table]], keys: Sequence[str],
                 lower_bounds: Sequence[tuple | None] | None = None) -> Iterator[pa.Table]:
    """The rows of `streams` (each sorted by `keys`, all of one schema) in key order, a table at a time; rows with
    equal keys come stream by stream, each stream's in its order: a stable sort of the streams concatenated.

    Rows below the smallest last key of any stream's current batch can all be given out; the stream that holds
    that key reads its next batch, so each stream holds one batch (and any rows tied with its last key). A stream
    with a lower bound (a key none of its rows is below, e.g. from a Parquet file's statistics) is opened only when
    the merge reaches it: streams whose keys do not overlap (datasets' ids rarely interleave) are read one after
    the other, and memory holds a batch of the streams in use, not one of every stream.
    """
    bounds = list(lower_bounds) if lower_bounds is not None else [None] * len(streams)
    waiting = {index: bound for index, bound in enumerate(bounds) if bound is not None}
    cursors = {index: _Cursor(iter(stream), keys) for index, stream in enumerate(streams) if bounds[index] is None}
    sort_keys = [(name, "ascending") for name in keys]
    while cursors or waiting:
        cursors = {i: c for i, c in sorted(cursors.items()) if c.keys or not c.exhausted}
        lasts = [c.keys[-1] for c in cursors.values() if not c.exhausted]
        frontier = min(lasts) if lasts else None  # None: the open streams' rows are all read
        nearest = min(waiting.values()) if waiting else None
        if nearest is not None and (frontier is None or nearest <= frontier):  # a waiting stream's rows may come next
            for index in [i for i, bound in waiting.items() if bound == nearest]:
                cursors[index] = _Cursor(iter(streams[index]), keys)
                del waiting[index]
            continue
        parts = []
        for cursor in cursors.values():
            count = len(cursor.keys) if frontier is None else bisect_left(cursor.keys, frontier)
            if count:
                parts.append(cursor.take(count))
        if len(parts) == 1:
            yield parts[0]
        elif parts:
            table = pa.concat_tables(parts)
            yield table.take(pc.sort_indices(table, sort_keys=sort_keys))  # Arrow's sort is stable
        for cursor in cursors.values():
            if not cursor.exhausted and (not cursor.keys or cursor.keys[-1] == frontier):
                cursor.fill()


def read_batches(path: str | Path, schema: pa.Schema | None = None,
                 batch_rows: int = MERGE_BATCH_ROWS) -> Iterator[pa.Table]:
    """A Parquet file a table of `batch_rows` at a time, conformed to `schema` when one is given."""
    parquet = pq.ParquetFile(path)
    for batch in parquet.iter_batches(batch_size=batch_rows):
        table = pa.Table.from_batches([batch])
        yield table if schema is None else conform(table, schema)


def conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """`table` with `schema`'s columns in its order and types (a column it lacks is all null)."""
    arrays = [table.column(field.name).cast(field.type) if field.name in table.column_names
              else pa.nulls(table.num_rows, field.type) for field in schema]
    return pa.Table.from_arrays(arrays, schema=schema)


def type_witness(frame: pd.DataFrame) -> pd.DataFrame:
    """The few rows of `frame` that decide the Arrow schema pandas gives it: its dtypes, its first row, each
    column's first value and, in a column of lists, its first list with an item (and with a non-empty first item,
    for lists of lists): Arrow infers a list's item type from its items. Witnesses concatenated witness the frames
    concatenated, so the file's schema is fixed without holding the rows."""
    if frame.empty:
        return frame
    firsts = [int(k) for k in frame.notna().to_numpy().argmax(axis=0)]
    chosen = {0, *firsts}
    for column, first in zip(frame.columns, firsts):
        if _listed(frame[column].iloc[first]):
            chosen.add(next((k for k, value in enumerate(frame[column])
                             if _listed(value) and len(value) and (not _listed(value[0]) or len(value[0]))), first))
    return frame.iloc[sorted(chosen)]


def _listed(value: object) -> bool:
    return isinstance(value, (list, tuple, np.ndarray))


class SortedRuns:
    """Frames added one at a time, each kept on disk as a run sorted by `keys` (in a hidden folder beside the
    file they will make, which a killed build's clean-up removes); `write` merges them into one Parquet file."""

    def __init__(self, target: Path, keys: Sequence[str]) -> None:
        self.target, self.keys = Path(target), list(keys)
        self.target.parent.mkdir(parents=True, exist_ok=True)
        self.folder = Path(tempfile.mkdtemp(prefix=f".{self.target.name}.runs.tmp-", dir=self.target.parent))
        self.runs: list[Path] = []
        self.witness: pd.DataFrame | None = None
        self.made = 0

    def __enter__(self) -> SortedRuns:
        return self

    def __exit__(self, *exc: object) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)

    def add(self, frame: pd.DataFrame) -> None:
        """Sort `frame` (stably, as pandas sorts the whole) and write it as the next run."""
        frame = frame.sort_values(self.keys, kind="stable").reset_index(drop=True)
        table = pa.Table.from_pandas(frame, preserve_index=False)
        # an empty frame (a chunk whose every item was dropped, its columns made as object) witnesses no type: with
        # it, a float column all NaN elsewhere became object and Arrow's null, and casting the runs' doubles failed
        if self.witness is None or self.witness.empty:
            self.witness = type_witness(frame)
        elif not frame.empty:
            self.witness = type_witness(pd.concat([self.witness, type_witness(frame)]))
        self.runs.append(self._new_path())
        # row groups of a batch: a run is read a row group at a time, so this bounds what a run holds in memory
        pq.write_table(table, self.runs[-1], row_group_size=MERGE_BATCH_ROWS)

    def _new_path(self) -> Path:
        self.made += 1
        return self.folder / f"run-{self.made:06d}.parquet"

    def merged(self) -> tuple[pa.Schema, Iterator[pa.Table]]:
        """The schema of all rows and their tables in key order (runs merged MERGE_WIDTH at a time)."""
        # the schema pandas would give every row at once (pandas 3 concatenates a str column with an all-None
        # object one as object, which Arrow stores as string, not large_string): read off the witnesses
        schema = pa.Table.from_pandas(self.witness, preserve_index=False).schema
        # declared in the file, so the release need not read the ids back to learn that they are in order
        schema = schema.with_metadata({**(schema.metadata or {}), SORTED_BY: ",".join(self.keys).encode()})
        runs = list(self.runs)
        while len(runs) > MERGE_WIDTH:  # consecutive runs, so rows with equal keys keep their order
            merged = self._new_path()
            write_row_groups(merge_sorted([read_batches(p, schema) for p in runs[:MERGE_WIDTH]], self.keys), schema,
                             merged, MERGE_BATCH_ROWS)
            for path in runs[:MERGE_WIDTH]:
                path.unlink()
            runs = [merged, *runs[MERGE_WIDTH:]]
        return schema, merge_sorted([read_batches(p, schema) for p in runs], self.keys)


def sorted_by(schema: pa.Schema) -> list[str]:
    """The keys a file's rows are in order of, as `SortedRuns.merged` declares them ([] when undeclared)."""
    value = (schema.metadata or {}).get(SORTED_BY)
    return value.decode("utf-8").split(",") if value else []


def write_row_groups(tables: Iterable[pa.Table], schema: pa.Schema, path: Path, row_group_rows: int) -> int:
    """Write `tables` to `path` (a temporary: the caller makes the write atomic) in row groups of exactly
    `row_group_rows` rows, the last one shorter, as `write_table(row_group_size=...)` cuts them; returns the rows."""
    pending: list[pa.Table] = []
    held = written = 0
    with pq.ParquetWriter(path, schema) as writer:
        for table in tables:
            pending.append(table)
            held += table.num_rows
            while held >= row_group_rows:
                whole = pa.concat_tables(pending)
                writer.write_table(whole.slice(0, row_group_rows), row_group_size=row_group_rows)
                pending = [whole.slice(row_group_rows)]
                held -= row_group_rows
                written += row_group_rows
        if held or not written:  # no rows at all: one empty row group, as pandas writes an empty frame
            writer.write_table(pa.concat_tables(pending) if pending else schema.empty_table(),
                               row_group_size=row_group_rows)
    return written + held
