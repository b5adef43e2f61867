"""The release writer's memory is bounded by its row groups, not by the number of rows."""
from __future__ import annotations

import gc
import tracemalloc
from pathlib import Path

import numpy as np
import pyarrow as pa
import pandas as pd
import pytest
from PIL import Image
from support.build_manifests import make_manifest

from mmbu.build.release import stream, write_release

ROW_GROUP_BYTES = 64_000
LABELS = ["monocyte", "promyelocyte", "proerythroblast", "band neutrophil", "lymphocyte"]


def noise_rows(directory: Path, count: int, manifest) -> pd.DataFrame:
    """`count` ungrounded rows, each pointing at its own incompressible 48x48 RGB PNG (about 7 KB)."""
    rng = np.random.default_rng(count)
    directory.mkdir()
    rows = []
    for index in range(count):
        path = directory / f"img{index:05d}.png"
        Image.fromarray(rng.integers(0, 256, (48, 48, 3), dtype=np.uint8)).save(path, compress_level=1)
        rows.append({
            "sample_id": f"demo_marrow-{index:016x}", "dataset_id": manifest.id, "image": str(path),
            "answer": LABELS[index % 5], "options": LABELS, "question_no_context": "Which cell type?",
            "question_modality": "Which cell type in this light microscopy image?",
            "question_full_context": "Which cell type in this brightfield microscopy image of a smear?",
            "license": manifest.license, "task": "ungrounded_classification", "label": LABELS[index % 5],
            "modality": "light microscopy", "sub_modality": "brightfield microscopy", "domain": "Hematology",
            "image_width": 48, "image_height": 48,
        })
    return pd.DataFrame(rows)


def peak_bytes(rows, out: Path, manifest) -> int:
    """tracemalloc's peak of Python allocations while the whole release is written."""
    gc.collect()
    tracemalloc.start()
    try:
        write_release({"ungrounded_classification": rows}, out, [manifest], {"created": "2026-01-01"},
                      max_row_group_bytes=ROW_GROUP_BYTES)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.fixture(scope="module")
def manifest():
    return make_manifest({"kind": "folder_per_class"})


def test_peak_memory_does_not_grow_with_the_row_count(tmp_path, manifest, monkeypatch):
    # rows are read ROWS_PER_CHUNK (1024) at a time; made smaller here so that both row counts below span several
    # chunks, as a paper-scale config does
    monkeypatch.setattr(stream, "ROWS_PER_CHUNK", 32)
    small, large = 100, 400
    small_rows = noise_rows(tmp_path / "small", small, manifest)
    large_rows = noise_rows(tmp_path / "large", large, manifest)
    png_bytes = sum(Path(p).stat().st_size for p in large_rows["image"])
    peak_bytes(small_rows, tmp_path / "warm-up", manifest)  # first-use caches (fonts, schema) are not the writer's
    small_peak = peak_bytes(small_rows, tmp_path / "small-release", manifest)
    large_peak = peak_bytes(large_rows, tmp_path / "large-release", manifest)
    growth = large_peak - small_peak
    # 300 more rows hold ~2 MB of PNGs; holding them, or a record per row, would show here. What may grow:
    # a few ints and strings per row (weights, positions, the card's counts), well under one row group.
    assert png_bytes > 30 * ROW_GROUP_BYTES
    assert growth < ROW_GROUP_BYTES, (small_peak, large_peak)


def test_many_small_rows_in_one_row_group_are_not_held_as_records(tmp_path, manifest, monkeypatch):
    """Thousands of rows fit one 100 MB row group; given as a DataFrame, they pass through a rows file and the writer
    holds no record per row (a dict per row would be ~2 KB)."""
    monkeypatch.setattr(stream, "ROWS_PER_CHUNK", 64)
    one = noise_rows(tmp_path / "one", 1, manifest).iloc[0].to_dict()
    Image.fromarray(np.zeros((8, 8), np.uint8)).save(one["image"])  # tiny: the rows, not a row group's PNGs, count

    def rows(count: int) -> pd.DataFrame:
        return pd.DataFrame([{**one, "sample_id": f"demo_marrow-{k:016x}", "label": LABELS[k % 5],
                              "answer": LABELS[k % 5]} for k in range(count)])

    small, large = rows(500), rows(2000)
    # warmed up with the larger frame: a one-off allocation the session's history decides the time of (an
    # interpreter-wide table growing, ~8 MB once) must fall here and not in the measured large release
    write_release({"ungrounded_classification": large}, tmp_path / "warm-up", [manifest], {"created": "2026-01-01"})
    peaks = []
    for name, frame in (("small", small), ("large", large)):
        gc.collect()
        tracemalloc.start()
        try:
            write_release({"ungrounded_classification": frame}, tmp_path / name, [manifest], {"created": "2026-01-01"})
            peaks.append(tracemalloc.get_traced_memory()[1])
        finally:
            tracemalloc.stop()
    # 1,500 more records as dicts would add ~3 MB; positions, weights and the card's columns ~0.2 MB
    assert peaks[1] - peaks[0] < 600_000, peaks


def interleaved_files(frame: pd.DataFrame, folder: Path, name: str) -> list[Path]:
    """`frame`'s rows dealt to three datasets' rows files, written by the rows step's writer, the ids of two of
    which interleave (`frame`'s ids: 'aa-…' every third row, 'ab-…' the others)."""
    from mmbu.build.sorted_runs import SortedRuns
    from mmbu.build.steps import ROWS_ORDER, write_rows_file

    frame = frame.assign(image_sample_id=frame["sample_id"])  # an ungrounded row is its image's only row
    paths = []
    for part in range(3):
        paths.append(folder / f"{name}-{part}.parquet")
        with SortedRuns(paths[-1], ROWS_ORDER) as runs:
            runs.add(frame.iloc[part::3].reset_index(drop=True))
            write_rows_file(runs, paths[-1])
    return paths


def streamed_peak(parts: list[Path], out: Path, manifest, count: int) -> int:
    """The same peak while a release is written from rows files (the build's path: `RowsFiles`)."""
    from mmbu.build.release.rows import RowsFiles

    return peak_bytes(RowsFiles(tuple((str(p), frozenset()) for p in parts), "ungrounded_classification", count),
                      out, manifest)


def test_a_config_read_from_rows_files_is_streamed_whatever_its_row_count(tmp_path, manifest, monkeypatch):
    """The build hands a release worker per-dataset rows files; it reads them a batch at a time in release order
    (a DataFrame of the config's rows would grow with the rows)."""
    from mmbu.build.steps import ROWS_PER_GROUP

    monkeypatch.setattr(stream, "ROWS_PER_CHUNK", 32)
    monkeypatch.setattr("mmbu.build.steps.ROWS_PER_GROUP", 64)
    assert ROWS_PER_GROUP > 64

    def rows_files(name: str, count: int) -> list[Path]:
        frame = noise_rows(tmp_path / name, count, manifest)
        frame["sample_id"] = [f"{'ab' if k % 3 else 'aa'}-{k:016x}" for k in range(count)]
        return interleaved_files(frame, tmp_path, name)

    small, large = rows_files("small", 100), rows_files("large", 500)
    streamed_peak(small, tmp_path / "warm-up", manifest, 100)
    small_peak = streamed_peak(small, tmp_path / "small-release", manifest, 100)
    large_peak = streamed_peak(large, tmp_path / "large-release", manifest, 500)
    # what may grow: a 16-byte digest per distinct image; holding the rows (a DataFrame of them) would add 1.7 KB per
    # row here, and a sample id, weight and count kept per row ~0.7 KB
    assert (large_peak - small_peak) / 400 < 100, (small_peak, large_peak)
    # the same rows, in the same order, as a release written from one DataFrame of them
    whole = pd.concat([pd.read_parquet(p) for p in large], ignore_index=True)
    write_release({"ungrounded_classification": whole}, tmp_path / "from-frame", [manifest], {"created": "2026-01-01"},
                  max_row_group_bytes=ROW_GROUP_BYTES)
    shards = sorted((tmp_path / "large-release" / "data").rglob("*.parquet"))
    assert len(shards) >= 1
    assert [p.read_bytes() for p in shards] == [
        p.read_bytes() for p in sorted((tmp_path / "from-frame" / "data").rglob("*.parquet"))]


POOLS = []  # kept alive: Arrow buffers (and caches) made while measuring may be freed into their pool later


def traced_peaks(write) -> tuple[int, int]:
    """Peak Python allocations (tracemalloc) and peak Arrow allocations (its buffers are not traced) of `write()`."""
    previous = pa.default_memory_pool()
    pool = pa.proxy_memory_pool(previous)
    POOLS.append(pool)
    gc.collect()
    pa.set_memory_pool(pool)
    tracemalloc.start()
    try:
        write()
        return tracemalloc.get_traced_memory()[1], pool.max_memory()
    finally:
        tracemalloc.stop()
        pa.set_memory_pool(previous)


def test_a_config_streamed_from_rows_files_keeps_nothing_per_row(tmp_path, manifest, monkeypatch):
    """A release worker keeps no sample id, merge position, usable flag, weight or card tuple per row (~0.7 KB per
    row): the files are merged by a heap over their batches, the layout and counts are aggregated as rows are
    checked, and what remains per row is a 16-byte digest of each distinct image (the statistics count distinct images
    per modality)."""
    from mmbu.build.release.rows import RowsFiles

    # a rows file is read a row group at a time: made smaller than the files of both measurements
    monkeypatch.setattr(stream, "ROWS_PER_CHUNK", 128)
    monkeypatch.setattr("mmbu.build.steps.ROWS_PER_GROUP", 256)
    one = noise_rows(tmp_path / "one", 1, manifest).iloc[0].to_dict()
    Image.fromarray(np.zeros((8, 8), np.uint8)).save(one["image"])  # tiny: the rows, not the PNGs, are measured

    def rows_files(name: str, count: int) -> RowsFiles:
        """Three datasets' rows files whose sample ids interleave; every row shows the same tiny PNG."""
        frame = pd.DataFrame([{**one, "sample_id": f"{'ab' if k % 3 else 'aa'}-{k:016x}", "label": LABELS[k % 5],
                               "answer": LABELS[k % 5]} for k in range(count)])
        paths = interleaved_files(frame, tmp_path, name)
        return RowsFiles(tuple((str(p), frozenset()) for p in paths), "ungrounded_classification", count)

    def release(files: RowsFiles, out: Path) -> None:
        write_release({"ungrounded_classification": files}, out, [manifest], {"created": "2026-01-01"},
                      max_row_group_bytes=1_000_000)

    small, large = rows_files("small", 6_000), rows_files("large", 24_000)
    release(small, tmp_path / "warm-up")
    small_peaks = traced_peaks(lambda: release(small, tmp_path / "small-release"))
    large_peaks = traced_peaks(lambda: release(large, tmp_path / "large-release"))
    python_per_row, arrow_per_row = ((b - a) / 18_000 for a, b in zip(small_peaks, large_peaks))
    assert python_per_row < 48, (small_peaks, large_peaks)
    assert arrow_per_row < 16, (small_peaks, large_peaks)
