"""Turn question rows (DataFrames from the questions stage) into release records with embedded PNGs."""
from __future__ import annotations

import hashlib
import math
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from mmbu.build.layouts.masks import mask_png
from mmbu.build.release.shards import MAX_ROW_GROUP_BYTES, MAX_SHARD_BYTES, ShardLayout
from mmbu.build.release.stats import ReleaseCounts
from mmbu.core.exclusions import Exclusion
from mmbu.core.release import QUESTION_COLUMNS, RELEASE_COLUMNS, release_features

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
REQUIRED = ("sample_id", "dataset_id", "image", "answer", "options", *QUESTION_COLUMNS.values(), "license")


class ReleaseInputError(ValueError):
    """The rows handed to the release writer lack a contract column (a pipeline bug, not bad data)."""


def _absent(value: object) -> bool:
    """None/NaN/NA; containers (lists, arrays, bytes, dicts) are never 'absent', even when empty."""
    if isinstance(value, (list, tuple, dict, np.ndarray, bytes, bytearray, str, Path)):
        return False
    return value is None or value is pd.NA or value is pd.NaT or (isinstance(value, float) and math.isnan(value))


@dataclass(frozen=True)
class PngRef:
    """An image to embed. A file's bytes are read only when its shard is written, so a release of
    many thousands of images never holds them all in memory."""

    source: Path | bytes
    path: str  # the name stored in the Image feature's `path`
    size: int

    def load(self) -> bytes:
        data = self.source if isinstance(self.source, bytes) else self.source.read_bytes()
        if not data.startswith(PNG_MAGIC):
            raise ValueError(f"{self.path} is no longer a PNG")
        return data

    def struct(self) -> dict[str, object]:
        return {"bytes": self.load(), "path": self.path}


def png_file_size(path: str, what: str, named: object = None) -> int:
    """The size of the PNG file at `path`; ValueError naming it (as `named`, when given) if it cannot be read or
    is not a PNG. Plain os calls: the release checks every row's image this way."""
    named = path if named is None else named
    try:
        handle = os.open(path, os.O_RDONLY)
        try:
            head, size = os.read(handle, len(PNG_MAGIC)), os.fstat(handle).st_size
        finally:
            os.close(handle)
    except OSError as exc:
        raise ValueError(f"the {what} file {named} cannot be read ({exc.strerror or exc})") from None
    if head != PNG_MAGIC:
        raise ValueError(f"the {what} file {named} is not a PNG")
    return size


def png_ref(value: object, path: str, what: str, checked: bool = False) -> PngRef:
    """Check a path, raw bytes, HF `{bytes, path}` dict or (masks) boolean array holds a PNG; raise
    ValueError with a readable sentence otherwise. Arrays are encoded now (binary masks are small).

    `checked`: the file was checked moments ago (the writer's second pass), so it is neither opened
    nor stat-ed again and `size` is 0; `PngRef.load` still refuses a file that stopped being a PNG."""
    if isinstance(value, dict):
        value = value.get("bytes") or value.get("path")
    if isinstance(value, np.ndarray):
        value = mask_png(value.astype(bool))
    if isinstance(value, (str, Path)):
        source = Path(value)
        if checked:
            return PngRef(source=source, path=path, size=0)
        return PngRef(source=source, path=path, size=png_file_size(str(source), what, value))
    if not isinstance(value, (bytes, bytearray)) or not bytes(value).startswith(PNG_MAGIC):
        raise ValueError(f"the {what} is not a PNG")
    return PngRef(source=bytes(value), path=path, size=len(value))


def materialise(record: dict) -> dict:
    """The record with its images read and hashed (called row group by row group)."""
    image = record["image"].struct()
    mask = record["mask"].struct() if isinstance(record["mask"], PngRef) else record["mask"]
    return {**record, "image": image, "mask": mask, "image_sha256": hashlib.sha256(image["bytes"]).hexdigest()}


def _int_boxes(boxes: object) -> list[list[int]] | None:
    if _absent(boxes):
        return None
    return [[int(round(float(v))) for v in box] for box in boxes]


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


def _release_record(row: dict, checked: bool = False) -> dict:
    """One row as a release record with `PngRef`s (checked to be PNGs, not yet read); ValueError if unusable."""
    image_key = row.get("image_sample_id") or row["sample_id"]
    image = png_ref(row["image"], f"{row['dataset_id']}/{image_key}.png", "image", checked)
    mask = None if _absent(row.get("mask")) else png_ref(
        row["mask"], f"{row['dataset_id']}/{row['sample_id']}_mask.png", "mask", checked)
    record = {column: None if _absent(row.get(column)) else row.get(column) for column in RELEASE_COLUMNS}
    record["image"], record["mask"] = image, mask
    record["boxes"] = _int_boxes(row.get("boxes"))
    record["options"] = [str(o) for o in row["options"]]
    aliases = row.get("answer_aliases")  # a list, or a numpy array after a Parquet round trip
    record["answer_aliases"] = [] if _absent(aliases) else [str(a) for a in aliases]
    for column, kind in (("image_width", int), ("image_height", int),
                         ("objective_power", float), ("microns_per_pixel", float)):
        record[column] = None if record[column] is None else kind(record[column])
    return record


ROWS_PER_BATCH = 1024  # records turned into Arrow at a time within a row group


def record_tables(records: Iterable[dict], layout: Sequence[Sequence[int]], schema: pa.Schema) -> Iterator[pa.Table]:
    """Row-group tables of `records` (in release order, as many as the layout's row groups hold), each a single-chunk
    Arrow table converted ROWS_PER_BATCH records at a time.

    A 100 MB row group of small images can hold many thousand rows; Arrow keeps a row far more
    compactly than its Python dict, so no group costs a dict per row. The chunks are combined into
    one before writing, so the Parquet bytes are those of a table built from all records at once.
    """
    records = iter(records)
    for length in (length for shard in layout for length in shard):
        batches = []
        while length:
            take = min(ROWS_PER_BATCH, length)
            batches.append(pa.RecordBatch.from_pylist([materialise(record) for record in islice(records, take)],
                                                      schema=schema))
            length -= take
        yield pa.Table.from_batches(batches, schema=schema).combine_chunks()


ROWS_PER_CHUNK = 1024  # rows turned into dicts at a time: bounds the per-row Python objects alive at once


@dataclass
class CheckedRows:
    """What checking a config's rows in release order found: where its usable rows go (shards and row groups), what
    the card and statistics count of them, which rows (by position in release order) are unusable and why."""

    layout: ShardLayout
    counts: ReleaseCounts = field(default_factory=ReleaseCounts)
    unusable: list[int] = field(default_factory=list)  # positions of the excluded rows (as many as exclusions)
    exclusions: list[Exclusion] = field(default_factory=list)
    checked: int = 0

    def exclude(self, row: Mapping, reason: str) -> None:
        """The next row in release order is unusable (`row` needs dataset_id, sample_id and source_path)."""
        self.exclusions.append(Exclusion(dataset_id=row["dataset_id"], sample_id=row["sample_id"],
                                         item=str(row.get("source_path") or row["sample_id"]), stage="release",
                                         reason=reason))
        self.unusable.append(self.checked)
        self.checked += 1

    def add(self, row: dict) -> None:
        """Check the next row in release order (a row dict)."""
        try:
            record = _release_record(row)
        except ValueError as exc:
            self.exclude(row, str(exc))
            return
        self.checked += 1
        self.layout.add(row_bytes(record))
        self.counts.add([record["dataset_id"]], [record["modality"]], [record["sub_modality"]], [record["image"].path])


@dataclass
class ReleasePlan:
    """One config's usable rows in release order, without their records held in memory.

    Checking every row first gives the shard layout (shard names say "-of-N") and the exclusions
    before a byte is written; `tables()` then rebuilds the records chunk by chunk while the shards
    are written, so memory holds an int per row rather than a dict per row.
    """

    rows: pd.DataFrame
    positions: np.ndarray  # row positions in `rows`, in release order, of the usable rows
    checked: CheckedRows

    def records(self) -> Iterator[dict]:
        for start in range(0, len(self.positions), ROWS_PER_CHUNK):
            chunk = self.rows.iloc[self.positions[start:start + ROWS_PER_CHUNK]]
            yield from (_release_record(row, checked=True) for row in chunk.to_dict(orient="records"))

    def tables(self) -> Iterator[pa.Table]:
        """One Arrow table per row group of the layout, in order."""
        return record_tables(self.records(), self.checked.layout.shards, release_features().arrow_schema)


def _release_order(rows: pd.DataFrame) -> np.ndarray:
    """Row positions in release order: by image id (a row's own id where it has none), then sample id, so the rows
    of one image are together (a row group stores the image once) and shard content is rebuild-stable; the same
    permutation as a stable `sort_values` of those two keys, without copying every column."""
    own = rows["sample_id"].reset_index(drop=True)
    image = rows["image_sample_id"].reset_index(drop=True).fillna(own) if "image_sample_id" in rows else own
    return pd.DataFrame({"image": image, "sample_id": own}).sort_values(["image", "sample_id"], kind="stable") \
        .index.to_numpy()


def check_columns(columns: Iterable[str]) -> None:
    absent = [c for c in REQUIRED if c not in set(columns)]
    if absent:
        raise ReleaseInputError(f"release rows lack the column(s) {', '.join(absent)}")


def plan_release(rows: pd.DataFrame, max_shard_bytes: int = MAX_SHARD_BYTES,
                 max_row_group_bytes: int = MAX_ROW_GROUP_BYTES) -> ReleasePlan:
    """Check every row of one config (PNG headers, contract columns); unusable rows become exclusions."""
    check_columns(rows.columns)
    order = _release_order(rows)
    checked = CheckedRows(ShardLayout(max_shard_bytes, max_row_group_bytes))
    for start in range(0, len(order), ROWS_PER_CHUNK):
        for row in rows.iloc[order[start:start + ROWS_PER_CHUNK]].to_dict(orient="records"):
            checked.add(row)
    kept = np.delete(order, checked.unusable) if len(order) else order
    return ReleasePlan(rows=rows, positions=np.asarray(kept, dtype=np.int64), checked=checked)


def group_by_task(frames: Iterable[pd.DataFrame]) -> dict[str, pd.DataFrame]:
    """Concatenate per-dataset question frames and split them by their `task` column."""
    frames = [f for f in frames if not f.empty]
    if not frames:
        return {}
    combined = pd.concat(frames, ignore_index=True)
    return {task: part.reset_index(drop=True) for task, part in combined.groupby("task", sort=True)}


@dataclass(frozen=True)
class RowsFiles:
    """One config's rows, spread over per-dataset rows Parquet files: only paths cross to the process
    that writes the config, which reads just that config's rows (so no process holds every config).
    Each part is (rows file, (image id, task) keys the cross-dataset duplicate check dropped)."""

    parts: tuple[tuple[str, frozenset[tuple[str, str]]], ...]
    task: str
    count: int = 0  # rows expected (the largest config is written first)
