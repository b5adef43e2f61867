"""rows.parquet written from sorted runs: the file one sort of every row wrote, in memory that does not grow
with the rows (the rows step keeps its chunks on disk instead of concatenating them)."""
from __future__ import annotations

import gc
import tracemalloc
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mmbu.build import sorted_runs, steps
from mmbu.build.sorted_runs import SortedRuns
from mmbu.build.steps import ROWS_ORDER, write_rows_file

TASKS = ["box_grounded_classification", "mask_grounded_classification", "ungrounded_classification"]


def chunk(rng: np.random.Generator, start: int, count: int, with_masks: bool = True,
          aliases_from: int = 5) -> pd.DataFrame:
    """`count` rows of several tasks whose sample ids interleave with every other chunk's; a few share their
    (task, sample id) so the order of ties shows."""
    ids = [f"ds-{int(v):016x}" for v in rng.integers(0, 2**40, count)]
    ids[1::7] = ids[0::7][:len(ids[1::7])]
    images = [ids[k - k % 4] for k in range(count)]  # four rows to an image, as the objects of one image are
    return pd.DataFrame({
        "sample_id": ids,
        "image_sample_id": images,
        "task": [TASKS[int(v)] for v in rng.integers(0, 3, count)],
        "ordinal": np.arange(start, start + count),  # tells tied rows apart
        "image": [f"/data/work/ds/images/{i}.png" for i in ids],
        "mask": [f"/data/work/ds/roi/{i}.png" if with_masks and k % 3 == 0 else None for k, i in enumerate(ids)],
        "options": [["a", "b", str(k % 5)] for k in range(count)],
        "answer_aliases": [["alias"] if k >= aliases_from else [] for k in range(count)],  # Arrow: list<null> alone
        "boxes": [[[1.0, 2.0, 3.0, 4.0]] if k % 2 else None for k in range(count)],
        "image_width": rng.integers(10, 2000, count),
        "microns_per_pixel": rng.random(count),
    })


def written_before(chunks: list[pd.DataFrame], path: Path, row_group: int) -> None:
    """What the rows step wrote before the runs: every chunk concatenated, sorted stably, written at once (as
    `to_parquet(index=False)` writes it), with the order the merge now declares in the schema's metadata."""
    rows = pd.concat(chunks, ignore_index=True).sort_values(ROWS_ORDER, kind="stable").reset_index(drop=True)
    table = pa.Table.from_pandas(rows, preserve_index=False)
    table = table.replace_schema_metadata({**table.schema.metadata, sorted_runs.SORTED_BY: ",".join(ROWS_ORDER).encode()})
    pq.write_table(table, path, row_group_size=row_group)


def written_from_runs(chunks: list[pd.DataFrame], path: Path) -> steps.RowsWritten:
    with SortedRuns(path, ROWS_ORDER) as runs:
        for frame in chunks:
            runs.add(frame)
        written = write_rows_file(runs, path)
    assert not [p for p in path.parent.iterdir() if p.name.startswith(".")]  # runs and temporaries removed
    return written


@pytest.mark.parametrize("merge_width", [2, 32])
def test_rows_file_from_runs_is_the_file_of_one_sort(tmp_path, monkeypatch, merge_width):
    # small batches and row groups so that batches, row groups and (width 2) rounds of merging all cut the rows
    monkeypatch.setattr(sorted_runs, "MERGE_BATCH_ROWS", 16)
    monkeypatch.setattr(sorted_runs, "MERGE_WIDTH", merge_width)
    monkeypatch.setattr(steps, "ROWS_PER_GROUP", 50)
    rng = np.random.default_rng(14)
    chunks = [chunk(rng, 100 * k, size) for k, size in enumerate([90, 61, 100, 7, 83])]
    written = written_from_runs(chunks, tmp_path / "runs" / "rows.parquet")
    written_before(chunks, tmp_path / "before.parquet", 50)
    assert (tmp_path / "runs" / "rows.parquet").read_bytes() == (tmp_path / "before.parquet").read_bytes()
    everything = pd.concat(chunks, ignore_index=True)
    assert written.rows == len(everything)
    assert written.per_task == {t: int(n) for t, n in everything["task"].value_counts().sort_index().items()}
    assert sorted(written.masks) == sorted(everything["mask"].dropna())


def test_chunks_whose_columns_were_inferred_differently_give_the_same_rows(tmp_path, monkeypatch):
    """A chunk without any mask (a null column to Arrow) and with empty alias lists only, one with missing widths
    (float), an empty chunk:
    the columns take the type all the rows give them together, and the values are those of one sort."""
    monkeypatch.setattr(sorted_runs, "MERGE_BATCH_ROWS", 16)
    rng = np.random.default_rng(3)
    chunks = [chunk(rng, 0, 40, with_masks=False, aliases_from=40), chunk(rng, 100, 40), chunk(rng, 200, 0),
              chunk(rng, 300, 30)]
    chunks[2]["image_width"] = chunks[2]["image_width"].astype(float)
    chunks[3]["image_width"] = chunks[3]["image_width"].astype(float)
    chunks[3].loc[::4, "image_width"] = np.nan
    written_from_runs(chunks, tmp_path / "runs" / "rows.parquet")
    # the rows of every chunk: an empty chunk has none, so it decides no type (concatenated, its object columns
    # would turn str columns object and all-NaN floats null; see the test below)
    written_before([c for c in chunks if len(c)], tmp_path / "before.parquet", steps.ROWS_PER_GROUP)
    ours, before = pq.read_table(tmp_path / "runs" / "rows.parquet"), pq.read_table(tmp_path / "before.parquet")
    assert ours.schema.remove_metadata() == before.schema.remove_metadata()
    assert ours.equals(before)
    pd.testing.assert_frame_equal(ours.to_pandas(), before.to_pandas())


def test_no_rows_give_one_empty_row_group_as_before(tmp_path):
    empty = chunk(np.random.default_rng(0), 0, 0)
    written = written_from_runs([empty], tmp_path / "runs" / "rows.parquet")
    written_before([empty], tmp_path / "before.parquet", steps.ROWS_PER_GROUP)
    assert written.rows == 0 and written.per_task == {} and written.masks == []
    ours = pq.ParquetFile(tmp_path / "runs" / "rows.parquet")
    assert ours.metadata.num_row_groups == pq.ParquetFile(tmp_path / "before.parquet").metadata.num_row_groups
    assert ours.read().equals(pq.read_table(tmp_path / "before.parquet"))


POOLS = []  # kept alive: buffers Arrow allocated (and caches) may outlive a measurement and free into their pool


def peaks(chunks: int, size: int, path: Path) -> tuple[int, int]:
    """Peak Python allocations (tracemalloc) and peak Arrow allocations while `chunks` chunks of rows, made one
    at a time as the rows step makes them, are added and written as rows.parquet."""
    rng = np.random.default_rng(chunks)
    previous = pa.default_memory_pool()
    pool = pa.proxy_memory_pool(previous)  # its own peak: Arrow's buffers are not traced by tracemalloc
    POOLS.append(pool)
    gc.collect()
    pa.set_memory_pool(pool)
    tracemalloc.start()
    try:
        with SortedRuns(path, ROWS_ORDER) as runs:
            for k in range(chunks):
                runs.add(chunk(rng, k * size, size))
            write_rows_file(runs, path)
        return tracemalloc.get_traced_memory()[1], pool.max_memory()
    finally:
        tracemalloc.stop()
        pa.set_memory_pool(previous)


def test_writing_rows_file_does_not_hold_the_rows(tmp_path, monkeypatch):
    """Memory holds a row group, a batch per run and a string per mask row (the step's outputs), not the rows:
    keeping every chunk to concatenate and sort them would cost ~1.6 KB per row of a real dataset (~0.9 KB per row
    of these), so 30,000 rows more would add ~27 MB here."""
    # what memory may hold is a row group and MERGE_WIDTH batches and open runs: made small so that the rows
    # exceed them in both measurements
    monkeypatch.setattr(steps, "ROWS_PER_GROUP", 512)
    monkeypatch.setattr(sorted_runs, "MERGE_BATCH_ROWS", 64)
    monkeypatch.setattr(sorted_runs, "MERGE_WIDTH", 8)
    size = 1000
    peaks(2, size, tmp_path / "warm-up.parquet")
    small = peaks(12, size, tmp_path / "small.parquet")
    large = peaks(42, size, tmp_path / "large.parquet")
    added = 30 * size
    python_per_row = (large[0] - small[0]) / added
    arrow_per_row = (large[1] - small[1]) / added
    # the mask paths kept (a third of the rows, ~80 bytes each) are the only growth allowed
    assert python_per_row < 60, (small, large)
    assert arrow_per_row < 20, (small, large)


def sorted_streams(rng: np.random.Generator, count: int) -> list[pa.Table]:
    """`count` tables sorted by key, with keys that tie within and across tables; `origin` tells rows apart."""
    tables = []
    for index in range(count):
        keys = sorted(f"k{int(k):03d}" for k in rng.integers(0, 40, rng.integers(0, 30)))
        tables.append(pa.table({"key": keys, "origin": [f"{index}-{k}" for k in range(len(keys))]}))
    return tables


def batches_of(table: pa.Table, size: int, opened: list[int], index: int):
    opened.append(index)
    for start in range(0, table.num_rows, size):
        yield table.slice(start, size)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("with_bounds", [False, True])
def test_merge_sorted_is_a_stable_sort_of_the_streams_concatenated(seed, with_bounds):
    rng = np.random.default_rng(seed)
    tables = sorted_streams(rng, 7)
    opened: list[int] = []
    bounds = [(t.column("key")[0].as_py(),) if t.num_rows else ("k000",) for t in tables] if with_bounds else None
    merged = pa.concat_tables(list(sorted_runs.merge_sorted(
        [batches_of(t, int(rng.integers(1, 6)), opened, k) for k, t in enumerate(tables)], ["key"], bounds)))
    expected = pa.concat_tables(tables).to_pandas().sort_values("key", kind="stable").reset_index(drop=True)
    pd.testing.assert_frame_equal(merged.to_pandas(), expected)
    assert sorted(opened) == list(range(7))


def test_streams_with_lower_bounds_are_opened_only_when_the_merge_reaches_them():
    """Datasets whose ids do not interleave are read one after the other: never more than two open at once."""
    tables = [pa.table({"key": [f"d{d}-{k:03d}" for k in range(20)]}) for d in range(6)]
    live: set[int] = set()
    most = 0

    def stream(index: int):
        nonlocal most
        live.add(index)
        most = max(most, len(live))
        for start in range(0, 20, 4):
            yield tables[index].slice(start, 4)
        live.discard(index)

    bounds = [(f"d{d}-000",) for d in range(6)]
    merged = pa.concat_tables(list(sorted_runs.merge_sorted([stream(d) for d in range(6)], ["key"], bounds)))
    assert merged.column("key").to_pylist() == sorted(k for t in tables for k in t.column("key").to_pylist())
    assert most <= 2


def test_a_chunk_whose_every_row_was_dropped_does_not_decide_a_column_type(tmp_path):
    """A chunk whose items were all dropped comes as an empty frame of object columns; beside chunks whose float
    column is all NaN it made the column Arrow's null type, and writing their doubles as null failed."""
    rows = [chunk(np.random.default_rng(k), 100 * k, 20) for k in range(2)]
    for frame in rows:
        frame["microns_per_pixel"] = np.nan
    empty = pd.DataFrame({column: pd.Series([], dtype=object) for column in rows[0].columns})
    written_from_runs([rows[0], empty, rows[1]], tmp_path / "runs" / "rows.parquet")
    ours = pq.read_table(tmp_path / "runs" / "rows.parquet")
    assert ours.schema.field("microns_per_pixel").type == pa.float64()
    written_before(rows, tmp_path / "before.parquet", steps.ROWS_PER_GROUP)
    assert ours.equals(pq.read_table(tmp_path / "before.parquet"))


def test_the_rows_file_declares_its_order_and_the_release_trusts_it_without_reading_the_ids(tmp_path):
    from mmbu.build.release.stream import _in_order

    rng = np.random.default_rng(5)
    path = tmp_path / "runs" / "rows.parquet"
    written_from_runs([chunk(rng, 0, 40), chunk(rng, 100, 40)], path)
    assert sorted_runs.sorted_by(pq.ParquetFile(path).schema_arrow) == ROWS_ORDER
    assert _in_order(str(path), TASKS[0], frozenset())
    # a file without the declaration (an older build's) is read: in order or not, as its ids say
    rows = pd.read_parquet(path)
    rows.to_parquet(tmp_path / "undeclared.parquet", index=False)
    assert _in_order(str(tmp_path / "undeclared.parquet"), TASKS[0], frozenset())
    rows.iloc[::-1].to_parquet(tmp_path / "reversed.parquet", index=False)
    assert not _in_order(str(tmp_path / "reversed.parquet"), TASKS[0], frozenset())
