"""Parquet shards with embedded PNG bytes, at most `max_shard_bytes` each (HF's 500 MB default)."""
from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from functools import lru_cache
from itertools import islice
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from mmbu.build.release.rows import materialise
from mmbu.core.files import atomic_path
from mmbu.core.release import SPLIT, release_features

MAX_SHARD_BYTES = 500 * 1000 * 1000  # datasets.config.MAX_SHARD_SIZE ("500MB")
MAX_ROW_GROUP_BYTES = 100 * 1000 * 1000  # datasets.config.MAX_ROW_GROUP_SIZE ("100MB")


def plan_groups(weights: Sequence[int], limit: int) -> list[int]:
    """Lengths of consecutive groups whose weight stays under `limit` (a single heavy row gets its own)."""
    lengths: list[int] = []
    weight = 0
    for size in weights:
        if not lengths or weight + size > limit:
            lengths.append(0)
            weight = 0
        lengths[-1] += 1
        weight += size
    return lengths


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


ROWS_PER_BATCH = 1024  # records turned into Arrow at a time within a row group


def _row_group_table(records: Iterator[dict], length: int, schema: pa.Schema) -> pa.Table:
    """The next `length` records as one single-chunk Arrow table, converted ROWS_PER_BATCH at a time.

    A 100 MB row group of small images can hold many thousand rows; Arrow keeps a row far more
    compactly than its Python dict, so no group costs a dict per row. The chunks are combined into
    one before writing, so the Parquet bytes are those of a table built from all records at once.
    """
    batches = []
    while length:
        take = min(ROWS_PER_BATCH, length)
        batches.append(pa.RecordBatch.from_pylist([materialise(record) for record in islice(records, take)],
                                                  schema=schema))
        length -= take
    return pa.Table.from_batches(batches, schema=schema).combine_chunks()


def write_shards(records: Iterable[dict], weights: Sequence[int], config_dir: Path,
                 max_shard_bytes: int = MAX_SHARD_BYTES, max_row_group_bytes: int = MAX_ROW_GROUP_BYTES) -> list[Path]:
    """Write one config's records (in release order, one `row_bytes` weight each) as shards; each
    file is written temp + replace.

    `records` is consumed one row group (≤ `max_row_group_bytes`) at a time and only that group's
    images are read, so memory stays near one row group's PNGs however many rows there are.
    """
    schema = release_features().arrow_schema
    options = writer_options()
    records = iter(records)
    shard_lengths = plan_groups(weights, max_shard_bytes)
    config_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    first = 0
    for index, length in enumerate(shard_lengths):
        path = config_dir / shard_name(index, len(shard_lengths))
        with atomic_path(path) as temporary, pq.ParquetWriter(temporary, schema, **options) as writer:
            for group_length in plan_groups(weights[first:first + length], max_row_group_bytes):
                table = _row_group_table(records, group_length, schema)
                writer.write_table(table, row_group_size=group_length)
                del table  # before the next group is read
        paths.append(path)
        first += length
    return paths
