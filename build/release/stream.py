"""One config's rows read from the per-dataset rows files in release order, a batch at a time.

The release orders a config's rows by sample id across datasets. Only the sample ids (a few bytes per row) are
read up front; the rows themselves are read twice, once to check them and once to write them, as a merge of the
files: each file's rows of the task are sorted by sample id when the rows step writes them, so every file is
read front to back in batches, and memory holds a batch of each file in use (datasets' ids rarely interleave,
so usually one), whatever the number of rows. A rows file from before that sort is read whole and sorted (its
dataset's rows only).
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from mmbu.build.release.rows import ROWS_PER_CHUNK, CheckedRows, RowsFiles, _release_record, check_columns

KEY_COLUMNS = ["sample_id", "image_sample_id", "task"]


def _task_row_groups(parquet: pq.ParquetFile, task: str) -> list[int]:
    """Row groups that may hold `task` rows (by their min/max statistics; all when there are none)."""
    index = parquet.schema_arrow.get_field_index("task")
    groups = []
    for number in range(parquet.metadata.num_row_groups):
        statistics = parquet.metadata.row_group(number).column(index).statistics
        if statistics is None or not statistics.has_min_max or statistics.min <= task <= statistics.max:
            groups.append(number)
    return groups


def _batches(path: str, task: str, dropped: frozenset, columns: list[str] | None = None) -> Iterator[pd.DataFrame]:
    """The file's rows of `task` less the duplicate drops, in file order, ROWS_PER_CHUNK at a time."""
    from mmbu.build.duplicates.check import keep_rows

    parquet = pq.ParquetFile(path)
    wanted = None if columns is None else [c for c in columns if c in parquet.schema_arrow.names]
    for batch in parquet.iter_batches(batch_size=ROWS_PER_CHUNK, row_groups=_task_row_groups(parquet, task),
                                      columns=wanted):
        frame = batch.to_pandas()
        frame = frame[frame["task"] == task]
        if len(frame):
            yield keep_rows(frame, set(dropped)).reset_index(drop=True)


@dataclass
class _Part:
    path: str
    dropped: frozenset
    sample_ids: np.ndarray
    in_order: bool  # the file lists its rows of the task by sample id

    def rows(self, task: str) -> Iterator[dict]:
        """This part's rows in sample id order."""
        if self.in_order:
            for frame in _batches(self.path, task, self.dropped):
                yield from frame.to_dict(orient="records")
            return
        frame = pd.concat(list(_batches(self.path, task, self.dropped)), ignore_index=True)
        frame = frame.iloc[np.argsort(frame["sample_id"].to_numpy(), kind="stable")]
        for start in range(0, len(frame), ROWS_PER_CHUNK):
            yield from frame.iloc[start:start + ROWS_PER_CHUNK].to_dict(orient="records")


@dataclass
class StreamedPlan:
    """A config's usable rows, checked; `records()` reads them again in the same order while shards are written."""

    files: RowsFiles
    parts: list[_Part]
    sequence: np.ndarray  # the part of each row in release order
    usable: np.ndarray
    weights: list[int]
    counted: pd.DataFrame
    exclusions: list

    def records(self) -> Iterator[dict]:
        for row, usable in zip(merge(self.parts, self.sequence, self.files.task), self.usable):
            if usable:
                yield _release_record(row, checked=True)


def merge(parts: list[_Part], sequence: np.ndarray, task: str) -> Iterator[dict]:
    """Every part's rows interleaved by `sequence`; a part's reader lives from its first row to its last."""
    remaining = np.bincount(sequence, minlength=len(parts)) if len(sequence) else np.zeros(len(parts), int)
    readers: dict[int, Iterator[dict]] = {}
    for part in sequence.tolist():
        reader = readers.get(part)
        if reader is None:
            reader = readers[part] = parts[part].rows(task)
        yield next(reader)
        remaining[part] -= 1
        if not remaining[part]:
            reader.close()
            del readers[part]


def plan_files(files: RowsFiles) -> StreamedPlan:
    """Order one config's rows by sample id across its files, then check them in that order."""
    parts: list[_Part] = []
    for path, dropped in files.parts:
        frames = list(_batches(path, files.task, dropped, KEY_COLUMNS))
        ids = (np.concatenate([f["sample_id"].to_numpy(dtype=object) for f in frames]) if frames
               else np.empty(0, dtype=object))
        parts.append(_Part(path, dropped, ids, bool(np.all(ids[:-1] <= ids[1:])) if len(ids) > 1 else True))
    if parts:
        check_columns(pq.ParquetFile(parts[0].path).schema_arrow.names)
    every_id = np.concatenate([p.sample_ids for p in parts]) if parts else np.empty(0, dtype=object)
    owner = np.repeat(np.arange(len(parts)), [len(p.sample_ids) for p in parts])
    # each part's own order is its sorted ids, so a stable sort of all ids keeps every part's rows in their order
    sequence = owner[np.argsort(every_id, kind="stable")] if len(every_id) else owner
    for part in parts:
        part.sample_ids = np.empty(0, dtype=object)  # not needed again
    checked = CheckedRows()
    for row in merge(parts, sequence, files.task):
        checked.add(row)
    return StreamedPlan(files, parts, sequence, np.asarray(checked.usable, dtype=bool), checked.weights,
                        checked.counted_frame(), checked.exclusions)
