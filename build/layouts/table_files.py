"""The files a `parquet` layout reads, a batch of rows at a time: Parquet, and Arrow IPC as `datasets` writes it
(`save_to_disk` and Arrow-backed hub repositories: `data-00000-of-00001.arrow` in the IPC *stream* format) or as
the random-access IPC *file* format (Feather v2). The format is told by the file's first bytes, not its name.

Arrow files are memory-mapped and their record batches sliced, so a row batch costs its rows' Python objects,
never the file: the same bound as Parquet's `iter_batches`.

What a read may cost is checked against the budget (`mmbu.core.budget`'s `max_bytes`) from what the file declares
before anything is decoded: a Parquet row group by the uncompressed size its footer gives for the columns read (a
30 KB zstd page can hold a 1 GiB cell, and a page is decoded whole), an Arrow batch by its buffers' sizes (a cell's
length is in its offsets), row by row when a batch is over it. Over the budget is `TableFileError` naming the
row group or row and the declared size.
"""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mmbu.core import budget

PARQUET_MAGIC = b"PAR1"
ARROW_FILE_MAGIC = b"ARROW1"


class TableFileError(ValueError):
    """A file that is neither a readable Parquet nor a readable Arrow IPC file; the message names the cause."""


class TableFile:
    """One opened table file: its Arrow schema (with the `huggingface` features metadata `datasets` stores) and
    its rows in order."""

    def __init__(self, path: Path) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        self.path = path
        self._source = None
        self._parquet = None
        try:
            with open(path, "rb") as handle:
                head = handle.read(len(ARROW_FILE_MAGIC))
            if head.startswith(PARQUET_MAGIC):
                self.kind, self._parquet = "Parquet", pq.ParquetFile(path)
                self.schema = self._parquet.schema_arrow
                return
            self._source = pa.memory_map(str(path))
            if head == ARROW_FILE_MAGIC:
                self.kind, self._reader = "Arrow IPC file", pa.ipc.open_file(self._source)
            else:
                self.kind, self._reader = "Arrow IPC stream", pa.ipc.open_stream(self._source)
            self.schema = self._reader.schema
        except Exception as exc:  # noqa: BLE001 - pyarrow raises ArrowInvalid, OSError ...: the caller names the file
            self.close()
            raise TableFileError(f"not a readable Parquet or Arrow IPC file ({type(exc).__name__}: {exc})") from None

    def rows(self, columns: list[str], batch_rows: int) -> Iterator[dict[str, Any]]:
        """The rows' `columns` as dicts, `batch_rows` converted to Python at a time; TableFileError when the file
        turns out damaged part-way (the rows before it were good)."""
        done = 0
        try:
            for chunk in self._chunks(columns, batch_rows):
                rows = chunk.to_pylist()
                done += len(rows)
                yield from rows
        except TableFileError:
            raise
        except Exception as exc:  # noqa: BLE001 - a truncated or corrupt batch: pyarrow's own error, named
            raise TableFileError(f"the {self.kind} is damaged after its first {done} rows ({type(exc).__name__}: "
                                 f"{exc})") from None

    def _chunks(self, columns: list[str], batch_rows: int) -> Iterator[Any]:
        if self._parquet is not None:
            for group in range(self._parquet.num_row_groups):
                self._check_row_group(group, columns)
                yield from self._parquet.iter_batches(batch_size=batch_rows, columns=columns, row_groups=[group])
            return
        row = 0
        for batch in self._batches():
            batch = batch.select(columns)
            for offset in range(0, batch.num_rows, batch_rows):
                chunk = batch.slice(offset, batch_rows)
                self._check_chunk(chunk, row)
                row += chunk.num_rows
                yield chunk

    def _check_row_group(self, group: int, columns: list[str]) -> None:
        """Refuse a row group whose columns read declare more uncompressed bytes than the budget."""
        meta = self._parquet.metadata.row_group(group)
        wanted = set(columns)
        declared = sum(meta.column(i).total_uncompressed_size for i in range(meta.num_columns)
                       if meta.column(i).path_in_schema.split(".")[0] in wanted)
        try:
            budget.check_bytes(f"{self.path.name} (row group {group})", declared,
                               f"{meta.num_rows:,} row(s) of the column(s) {', '.join(columns)}, uncompressed")
        except budget.OverBudget as exc:
            raise TableFileError(str(exc)) from None

    def _check_chunk(self, chunk: Any, first_row: int) -> None:
        """Refuse a batch of Arrow rows whose cells (memory-mapped until converted) exceed the budget, naming the row
        that does when one row alone is over it."""
        limit = budget.current().max_bytes
        if chunk.nbytes <= limit:
            return
        for index in range(chunk.num_rows):
            try:
                budget.check_bytes(f"{self.path.name} (row {first_row + index})", chunk.slice(index, 1).nbytes,
                                   "cells")
            except budget.OverBudget as exc:
                raise TableFileError(str(exc)) from None

    def _batches(self) -> Iterator[Any]:
        if self.kind == "Arrow IPC file":
            for index in range(self._reader.num_record_batches):
                yield self._reader.get_batch(index)
        else:
            yield from self._reader

    def close(self) -> None:
        if self._source is not None:
            self._source.close()
            self._source = None
        if self._parquet is not None:
            self._parquet.close()
            self._parquet = None

    def __enter__(self) -> "TableFile":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
