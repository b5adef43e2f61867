"""The files a `parquet` layout reads, a batch of rows at a time: Parquet, and Arrow IPC as `datasets` writes it
(`save_to_disk` and Arrow-backed hub repositories: `data-00000-of-00001.arrow` in the IPC *stream* format) or as
the random-access IPC *file* format (Feather v2). The format is told by the file's first bytes, not its name.

Arrow files are memory-mapped and their record batches sliced, so a row batch costs its rows' Python objects,
never the file: the same bound as Parquet's `iter_batches`.
"""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

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
            yield from self._parquet.iter_batches(batch_size=batch_rows, columns=columns)
            return
        for batch in self._batches():
            batch = batch.select(columns)
            for offset in range(0, batch.num_rows, batch_rows):
                yield batch.slice(offset, batch_rows)

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
