"""Parquet shards with embedded PNG bytes, at most `max_shard_bytes` each (HF's 500 MB default)."""
from __future__ import annotations

import os
from contextlib import ExitStack
from functools import lru_cache
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from mmbu.core.files import atomic_path
from mmbu.core.release import SPLIT, release_features

MAX_SHARD_BYTES = 500 * 1000 * 1000  # datasets.config.MAX_SHARD_SIZE ("500MB")
MAX_ROW_GROUP_BYTES = 100 * 1000 * 1000  # datasets.config.MAX_ROW_GROUP_SIZE ("100MB")


class ShardLayout:
    """Shards and their row groups, planned row by row from each row's weight (its PNG and text bytes, `stream._check`):
    consecutive rows fill a shard while its weight stays under `max_shard_bytes`, and within each shard a row group
    while under `max_row_group_bytes` (a single heavy row gets its own). Only the lengths are kept, not a weight per
    row."""

    def __init__(self, max_shard_bytes: int, max_row_group_bytes: int) -> None:
        self.limits = (max_shard_bytes, max_row_group_bytes)
        self.shards: list[list[int]] = []  # row-group lengths of each shard
        self.weights = [0, 0]  # of the current shard and row group

    def add(self, weight: int) -> None:
        shard_limit, group_limit = self.limits
        if not self.shards or self.weights[0] + weight > shard_limit:
            self.shards.append([0])
            self.weights = [0, 0]
        elif self.weights[1] + weight > group_limit:
            self.shards[-1].append(0)
            self.weights[1] = 0
        self.shards[-1][-1] += 1
        self.weights[0] += weight
        self.weights[1] += weight

    @property
    def rows(self) -> int:
        return sum(map(sum, self.shards))


# PNG bytes are compressed already: compressing them or keeping min/max statistics of them only costs time (6x on
# the write); text columns get both. An image is shared by the rows of its objects (a box or mask row each, kept
# together by the release order), so `image.bytes` is dictionary-encoded: a row group stores each image once and
# its rows an index (a dataset of 50 masks per image was 50 times its images' size). Masks never repeat.
PNG_BYTE_COLUMNS = ("image.bytes", "mask.bytes")
SHARED_PNG_COLUMNS = ("image.bytes",)


@lru_cache(maxsize=1)
def _leaf_columns() -> tuple[str, ...]:
    """Dotted paths of the release schema's Parquet leaf columns (read from a zero-row file)."""
    sink = pa.BufferOutputStream()
    pq.write_table(release_features().arrow_schema.empty_table(), sink)
    metadata = pq.read_metadata(pa.BufferReader(sink.getvalue()))
    return tuple(metadata.schema.column(i).path for i in range(metadata.num_columns))


def writer_options() -> dict[str, object]:
    """ParquetWriter options per column: PNG bytes uncompressed (the image's dictionary-encoded), everything else zstd
    + dictionary + stats. The dictionary page may hold a whole row group's images (pyarrow's 1 MiB default would fall
    back to plain values after the first few)."""
    text = [path for path in _leaf_columns() if path not in PNG_BYTE_COLUMNS]
    return {"compression": {path: "NONE" if path in PNG_BYTE_COLUMNS else "ZSTD" for path in _leaf_columns()},
            "use_dictionary": [*text, *SHARED_PNG_COLUMNS], "write_statistics": text,
            "dictionary_pagesize_limit": MAX_ROW_GROUP_BYTES}


def shard_name(index: int, count: int) -> str:
    return f"{SPLIT}-{index:05d}-of-{count:05d}.parquet"


class ShardFiles:
    """A config's shards, written one after the other under provisional names (`.shard-00000`) and renamed to
    `test-00000-of-0000N.parquet` once the last is written and N is known (the one-pass writer learns N only then).
    Each is written temp + replace; when the config fails nothing is renamed and the provisional files are removed."""

    def __init__(self, config_dir: Path) -> None:
        self.config_dir = config_dir
        self.provisional: list[Path] = []
        self._open: ExitStack | None = None  # the current shard's writer inside its atomic_path
        self._writer: pq.ParquetWriter | None = None

    def write(self, shard: int, table: pa.Table) -> None:
        """Append `table` as one row group to shard `shard` (the current one, or the next)."""
        if shard == len(self.provisional):
            self._close_current()
            self.config_dir.mkdir(parents=True, exist_ok=True)
            self.provisional.append(self.config_dir / f".shard-{shard:05d}")
            self._open = ExitStack()
            temporary = self._open.enter_context(atomic_path(self.provisional[-1]))
            self._writer = self._open.enter_context(
                pq.ParquetWriter(temporary, release_features().arrow_schema, **writer_options()))
        self._writer.write_table(table, row_group_size=table.num_rows)

    def _close_current(self, error: BaseException | None = None) -> None:
        stack, self._open, self._writer = self._open, None, None
        if stack is not None:
            stack.__exit__(type(error) if error else None, error, error.__traceback__ if error else None)

    def finish(self) -> list[Path]:
        self._close_current()
        paths = [self.config_dir / shard_name(index, len(self.provisional)) for index in range(len(self.provisional))]
        for provisional, path in zip(self.provisional, paths):
            os.replace(provisional, path)
        return paths

    def abandon(self, error: BaseException) -> None:
        self._close_current(error)
        for provisional in self.provisional:
            provisional.unlink(missing_ok=True)
