"""Parquet shards with embedded PNG bytes, at most `max_shard_bytes` each (HF's 500 MB default)."""
from __future__ import annotations

import os
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from mmbu.build.release.features import SPLIT, release_features
from mmbu.build.release.rows import PngRef, materialise

MAX_SHARD_BYTES = 500 * 1000 * 1000  # datasets.config.MAX_SHARD_SIZE ("500MB")
MAX_ROW_GROUP_BYTES = 100 * 1000 * 1000  # datasets.config.MAX_ROW_GROUP_SIZE ("100MB")


def row_bytes(row: dict) -> int:
    """A row's weight for sharding: its image and mask bytes plus its text (an upper bound on the PNG part)."""
    size = 0
    for value in row.values():
        if isinstance(value, PngRef):
            size += value.size
        elif isinstance(value, dict) and value.get("bytes"):
            size += len(value["bytes"])
        elif isinstance(value, str):
            size += len(value.encode("utf-8"))
        elif isinstance(value, list):
            size += sum(len(str(v)) for v in value)
        else:
            size += 8
    return size


def plan_shards(rows: Sequence[dict], max_shard_bytes: int = MAX_SHARD_BYTES) -> list[list[dict]]:
    """Consecutive groups of rows whose weight stays under the limit (a single huge row gets its own shard)."""
    shards: list[list[dict]] = [[]]
    weight = 0
    for row in rows:
        size = row_bytes(row)
        if shards[-1] and weight + size > max_shard_bytes:
            shards.append([])
            weight = 0
        shards[-1].append(row)
        weight += size
    return [shard for shard in shards if shard]


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


def write_shards(rows: Sequence[dict], config_dir: Path, max_shard_bytes: int = MAX_SHARD_BYTES) -> list[Path]:
    """Write one config's rows (already in release order) as shards; each file is written temp + replace.

    Images are read one row group (≤ 100 MB) at a time, so memory stays near one row group's PNGs
    however large the release.
    """
    schema = release_features().arrow_schema
    shards = plan_shards(rows, max_shard_bytes)
    config_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for index, shard in enumerate(shards):
        path = config_dir / shard_name(index, len(shards))
        temp = path.with_name(f".{path.name}.tmp")
        with pq.ParquetWriter(temp, schema, **writer_options()) as writer:
            for group in plan_shards(shard, MAX_ROW_GROUP_BYTES):
                writer.write_table(pa.Table.from_pylist([materialise(record) for record in group], schema=schema),
                                   row_group_size=len(group))
        os.replace(temp, path)
        paths.append(path)
    return paths
