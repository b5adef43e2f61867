"""Parquet shards with embedded PNG bytes, at most `max_shard_bytes` each (HF's 500 MB default)."""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import lru_cache
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from mmbu.core.files import atomic_path
from mmbu.core.release import SPLIT, release_features

MAX_SHARD_BYTES = 500 * 1000 * 1000  # datasets.config.MAX_SHARD_SIZE ("500MB")
MAX_ROW_GROUP_BYTES = 100 * 1000 * 1000  # datasets.config.MAX_ROW_GROUP_SIZE ("100MB")


class ShardLayout:
    """Shards and their row groups, planned row by row from each row's `row_bytes` weight: consecutive rows fill a
    shard while its weight stays under `max_shard_bytes`, and within each shard a row group while under
    `max_row_group_bytes` (a single heavy row gets its own). Only the lengths are kept, not a weight per row."""

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


# PNG bytes are compressed already and never repeat: compressing them, dictionary-encoding them or
# keeping min/max statistics of them only costs time (6x on the write); text columns get all three.
PNG_BYTE_COLUMNS = ("image.bytes", "mask.bytes")


@lru_cache(maxsize=1)
def _leaf_columns() -> tuple[str, ...]:
    """Dotted paths of the release schema's Parquet leaf columns (read from a zero-row file)."""
    sink = pa.BufferOutputStream()
    pq.write_table(release_features().arrow_schema.empty_table(), sink)
    metadata = pq.read_metadata(pa.BufferReader(sink.getvalue()))
    return tuple(metadata.schema.column(i).path for i in range(metadata.num_columns))


def writer_options() -> dict[str, object]:
    """ParquetWriter options per column: PNG bytes stored plain, everything else zstd + dictionary + stats."""
    text = [path for path in _leaf_columns() if path not in PNG_BYTE_COLUMNS]
    return {"compression": {path: "NONE" if path in PNG_BYTE_COLUMNS else "ZSTD" for path in _leaf_columns()},
            "use_dictionary": text, "write_statistics": text}


def shard_name(index: int, count: int) -> str:
    return f"{SPLIT}-{index:05d}-of-{count:05d}.parquet"


def write_shards(tables: Iterable[pa.Table], layout: Sequence[Sequence[int]], config_dir: Path) -> list[Path]:
    """Write one config's rows as shards: `tables` holds one table per row group of `layout` (each shard's
    row-group lengths), in order; each file is written temp + replace.

    `tables` is consumed one row group (≤ MAX_ROW_GROUP_BYTES) at a time and only that group's images are read,
    so memory stays near one row group's PNGs however many rows there are.
    """
    schema = release_features().arrow_schema
    options = writer_options()
    tables = iter(tables)
    config_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for index, groups in enumerate(layout):
        path = config_dir / shard_name(index, len(layout))
        with atomic_path(path) as temporary, pq.ParquetWriter(temporary, schema, **options) as writer:
            for length in groups:
                table = next(tables)
                if table.num_rows != length:
                    raise RuntimeError(f"{path.name}: a row group of {table.num_rows} rows where {length} were planned")
                writer.write_table(table, row_group_size=length)
                del table  # before the next group is read
        paths.append(path)
    return paths
