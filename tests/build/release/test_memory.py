"""The release writer's memory is bounded by its row groups, not by the number of rows."""
from __future__ import annotations

import gc
import tracemalloc
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image
from support.build_manifests import make_manifest

from mmbu.build.release import rows as release_rows
from mmbu.build.release import shards as release_shards
from mmbu.build.release import write_release

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


def peak_bytes(rows: pd.DataFrame, out: Path, manifest) -> int:
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
    # rows become dicts ROWS_PER_CHUNK (1024) at a time, a fixed ~1 MB at paper scale; made smaller here
    # so that both row counts below span several chunks, as a paper-scale config does
    monkeypatch.setattr(release_rows, "ROWS_PER_CHUNK", 32)
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
    """Thousands of tiny images fit one 100 MB row group; a record dict per row (~2 KB) must not pile up."""
    monkeypatch.setattr(release_rows, "ROWS_PER_CHUNK", 64)
    monkeypatch.setattr(release_shards, "ROWS_PER_BATCH", 64)
    one = noise_rows(tmp_path / "one", 1, manifest).iloc[0].to_dict()

    def rows(count: int) -> pd.DataFrame:
        return pd.DataFrame([{**one, "sample_id": f"demo_marrow-{k:016x}", "label": LABELS[k % 5],
                              "answer": LABELS[k % 5]} for k in range(count)])

    small, large = rows(500), rows(2000)
    write_release({"ungrounded_classification": small}, tmp_path / "warm-up", [manifest], {"created": "2026-01-01"})
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
