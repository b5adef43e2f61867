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


# PNG bytes are compressed already: zstd would spend time for nothing there; text compresses well
UNCOMPRESSED_COLUMNS = ("image.bytes", "mask.bytes")


@lru_cache(maxsize=1)
def column_compression() -> dict[str, str]:
    """Parquet codec per leaf column of the release schema (leaf paths read from a zero-row file)."""
    schema = release_features().arrow_schema
    sink = pa.BufferOutputStream()
    pq.write_table(schema.empty_table(), sink)
    metadata = pq.read_metadata(pa.BufferReader(sink.getvalue()))
    paths = [metadata.schema.column(i).path for i in range(metadata.num_columns)]
    return {path: "NONE" if path in UNCOMPRESSED_COLUMNS else "ZSTD" for path in paths}


def shard_name(index: int, count: int) -> str:
    return f"{SPLIT}-{index:05d}-of-{count:05d}.parquet"


def write_shards(rows: Sequence[dict], config_dir: Path, max_shard_bytes: int = MAX_SHARD_BYTES) -> list[Path]:
    """Write one config's rows (already in release order) as shards; each file is written temp + replace.

    Images are read shard by shard, so memory stays near one shard's worth of PNGs.
    """
    schema = release_features().arrow_schema
    shards = plan_shards(rows, max_shard_bytes)
    config_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for index, shard in enumerate(shards):
        path = config_dir / shard_name(index, len(shards))
        average = max(1, sum(row_bytes(r) for r in shard) // len(shard))
        table = pa.Table.from_pylist([materialise(record) for record in shard], schema=schema)
        temp = path.with_name(f".{path.name}.tmp")
        pq.write_table(table, temp, row_group_size=max(1, MAX_ROW_GROUP_BYTES // average), compression=column_compression())
        os.replace(temp, path)
        paths.append(path)
    return paths
