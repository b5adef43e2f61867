"""One dataset's worker holds a chunk of samples at a time, not its dataset (issue 14, part 2).

The layout writes `samples.jsonl` as it finds samples, the convert step reads it and writes `converted.jsonl` a chunk
at a time, the rows step validates metadata and makes rows a chunk at a time, the hashes step reads `rows.parquet` in
batches. These tests show that the outputs do not depend on the chunk sizes (byte for byte), that a sample id repeated
across chunks is reported as one validation of the whole table reports it, that the traced peak grows by a small
bounded amount per added sample, and that a torn or missing step file is made again, never trusted.
"""
from __future__ import annotations

import gc
import json
import tracemalloc
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image
from support.build_repo import BLOOD, CELL_CLASSES, config_for, write_manifest, write_rows_step_datasets

from mmbu.build import sorted_runs, steps
from mmbu.build.cache import StepState
from mmbu.build.fetch.fetcher import fetch_dataset
from mmbu.build.json_lines import LinesWriter, is_complete, parse_record, read_lines
from mmbu.build.layouts import Sample
from mmbu.build.questions import ConvertedImage
from mmbu.build.metadata import MetadataChecks, failures_to_exclusions, normalise_metadata, validate_metadata
from mmbu.build.pipeline import run_build
from mmbu.build.steps import DatasetJob, process_dataset
from mmbu.curation.manifest import load_manifest
from mmbu.taxonomy import load_taxonomy

OUTPUTS = ("samples.jsonl", "layout-exclusions.json", "converted.jsonl", "convert-exclusions.json",
           "converted-hashes.jsonl", "rows.parquet", "rows-exclusions.json", "lint-report.txt", "image-hashes.parquet")


def small_chunks(monkeypatch, samples: int = 2, metadata: int = 3, hash_rows: int = 2) -> None:
    """Chunks of a few samples (rows.parquet's row groups are left alone: they shape the file, not the memory)."""
    monkeypatch.setattr(steps, "SAMPLES_PER_CHUNK", samples)
    monkeypatch.setattr(steps, "METADATA_PER_CHUNK", metadata)
    monkeypatch.setattr(steps, "HASH_BATCH_ROWS", hash_rows)


def png(path: Path, rng: np.random.Generator, shape=(24, 32)) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(rng.integers(0, 255, shape, dtype=np.uint8)).save(path)


def mixed_repo(root: Path) -> None:
    """Three datasets whose rows step drops items at every stage it has: a label table with per-sample stains (some
    outside the taxonomy: metadata failures) and a missing image, and `write_rows_step_datasets`."""
    manifests = root / "manifests" / "datasets"
    manifests.mkdir(parents=True)
    rng = np.random.default_rng(14)
    lines = ["image,label,stain"]
    for index in range(11):
        png(root / "src" / "table" / f"t{index}.png", rng)
        stain = "Purple Magic" if index % 4 == 1 else "Giemsa"
        lines.append(f"t{index}.png,{list(CELL_CLASSES)[index % 4]},{stain}")
    lines.append("gone.png,lym,Giemsa")
    (root / "src" / "table" / "labels.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    write_manifest(manifests, "table", source={"kind": "local", "path": "src/table"},
                   tasks=["ungrounded_classification"], metadata=BLOOD, labels=CELL_CLASSES,
                   layout={"kind": "label_table", "table": "labels.csv", "image_column": "image",
                           "label_column": "label", "metadata_columns": {"stain": "stain"}},
                   questions={"options_name": "blood cell type", "n_options": 4})
    write_rows_step_datasets(root, manifests, rng)


def step_files(data: Path) -> dict[str, bytes]:
    return {f"{work.name}/{name}": (work / name).read_bytes() for work in sorted((data / "work").iterdir())
            if work.is_dir() for name in OUTPUTS}


def test_every_step_file_is_the_same_whatever_the_chunk_sizes(tmp_path, monkeypatch):
    """Built with the default chunks (each dataset one chunk), then again with chunks of 2 samples, metadata
    validated 3 samples at a time and rows.parquet hashed 2 rows at a time: every file the steps write is the
    same, byte for byte (the rows, their order, the exclusions of every stage in order, the lint report)."""
    mixed_repo(tmp_path)
    first = run_build(config_for(tmp_path))
    assert first.release_rows, first.failed
    whole = step_files(tmp_path / "data")
    exclusions = {o.dataset_id: o.exclusions for o in first.datasets}
    stages = {e["stage"] for found in exclusions.values() for e in found}
    assert {"layout", "metadata", "lint"} <= stages, stages
    assert any("Purple Magic" in e["reason"] for e in exclusions["table"])

    small_chunks(monkeypatch)
    monkeypatch.setattr(steps, "STEPS_FORMAT", steps.STEPS_FORMAT + 1)  # every step runs again
    again = run_build(config_for(tmp_path))
    assert all(o.ran == ["layout", "select", "convert", "rows", "hashes"] for o in again.datasets), again.failed
    assert step_files(tmp_path / "data") == whole
    assert {o.dataset_id: o.exclusions for o in again.datasets} == exclusions
    assert again.release_rows == first.release_rows


def pairs_with_a_repeated_id(root: Path, count: int, repeated_at: tuple[int, int]
                             ) -> list[tuple[Sample, ConvertedImage]]:
    """`count` samples of a label table's shape (per-sample stains, some outside the taxonomy), each a PNG converted
    by the convert step, the sample at `repeated_at[1]` given the id of the one at `repeated_at[0]` (and a bad stain:
    two reasons in that row)."""
    rng = np.random.default_rng(count)
    manifest = cells_manifest(root)
    pairs = []
    for index in range(count):
        sample_id = f"cells-{index:016x}"
        stain = "Purple Magic" if index % 5 == 2 else "Giemsa"
        if index == repeated_at[1]:
            sample_id, stain = f"cells-{repeated_at[0]:016x}", "Purple Magic"
        png(root / "raw" / f"t{index}.png", rng)
        sample = Sample(sample_id=sample_id, dataset_id="cells", source_path=f"t{index}.png",
                        image_path=root / "raw" / f"t{index}.png", label="lym", image_size=(32, 24),
                        row_metadata={"stain": stain})
        work = root / "work" / str(index)  # a repeated id's PNG must not overwrite the other's
        converted, conversions, _ = steps.convert_samples([sample], manifest, work, "test")
        pairs.append((converted[0], conversions[sample_id]))
    return pairs


def cells_manifest(root: Path):
    root.mkdir(parents=True, exist_ok=True)
    return load_manifest(write_manifest(root, "cells", source={"kind": "local", "path": "src"},
                                        tasks=["ungrounded_classification"], layout={"kind": "folder_per_class"},
                                        metadata=BLOOD, labels=CELL_CLASSES,
                                        questions={"options_name": "blood cell type", "n_options": 4}))


@pytest.mark.parametrize("chunk", [1, 3, 4, 7, 40])
def test_a_sample_id_repeated_across_chunks_fails_as_in_one_validation_of_the_table(tmp_path, chunk):
    """The schema's only check across rows is `sample_id`'s uniqueness: chunked, an id that repeats in two chunks
    still fails in both rows, with the reasons (and exclusions) one call over the whole table gives."""
    manifest, taxonomy = cells_manifest(tmp_path), load_taxonomy()
    pairs = pairs_with_a_repeated_id(tmp_path, 17, (3, 12))
    samples = [sample for sample, _ in pairs]
    valid_whole, failures_whole = validate_metadata(normalise_metadata(samples, manifest, taxonomy), taxonomy)
    assert (failures_whole["check"] == "field_uniqueness").sum() == 2

    checks = MetadataChecks(manifest, taxonomy, steps._repeated_ids(pairs))
    valid = pd.concat([checks.validate(samples[start:start + chunk]) for start in range(0, len(samples), chunk)])
    pd.testing.assert_frame_equal(valid, valid_whole)
    # the same failures, in the same order per sample (the order exclusions list their reasons in)
    by_sample = ["dataset_id", "sample_id"]
    pd.testing.assert_frame_equal(checks.failures().sort_values(by_sample, kind="stable").reset_index(drop=True),
                                  failures_whole.sort_values(by_sample, kind="stable").reset_index(drop=True))
    assert checks.exclusions() == failures_to_exclusions(failures_whole)
    repeated = [e for e in checks.exclusions() if e.sample_id == f"cells-{3:016x}"]
    assert len(repeated) == 1 and repeated[0].reason.count("occurs more than once") == 2


def test_build_rows_reports_a_repeated_id_across_chunks_as_in_one_chunk(tmp_path, monkeypatch):
    """The rows step lists the repeated ids of converted.jsonl before its first chunk (each line's leading id)."""
    manifest, taxonomy = cells_manifest(tmp_path), load_taxonomy()
    with LinesWriter(tmp_path / "converted.jsonl") as lines:
        for sample, conversion in pairs_with_a_repeated_id(tmp_path, 9, (1, 7)):
            lines.write(steps.converted_line(sample, conversion))
    converted = steps.ConvertedFile(tmp_path / "converted.jsonl")
    assert converted.repeated_ids() == {f"cells-{1:016x}"}

    def outcome(name: str) -> tuple:
        path = tmp_path / f"{name}.parquet"
        with sorted_runs.SortedRuns(path, steps.ROWS_ORDER) as runs:
            dropped, report = steps.build_rows(converted, manifest, taxonomy, tmp_path, 0, runs)
            written = steps.write_rows_file(runs, path)
        return [e.model_dump() for e in dropped], report, path.read_bytes(), written.rows

    whole = outcome("whole")
    small_chunks(monkeypatch, samples=2, metadata=2)
    assert outcome("chunked") == whole
    dropped, _, _, rows = whole
    assert sum("occurs more than once" in e["reason"] for e in dropped) == 1  # one exclusion for both rows
    # the two rows of the repeated id (one with a bad stain) and a bad stain: dropped when metadata is attached
    assert sum(e["reason"] == "the image's metadata did not pass validation" for e in dropped) == 3
    assert rows == 6


def tiny_dataset(root: Path, count: int) -> DatasetJob:
    """A fetched folder-per-class dataset of `count` 8x8 PNGs (the real fetch: its completion record)."""
    pixels = np.random.default_rng(0).integers(0, 255, (8, 8), dtype=np.uint8)
    for index in range(count):
        folder = root / "src" / list(CELL_CLASSES)[index % 4]
        folder.mkdir(parents=True, exist_ok=True)
        Image.fromarray(pixels).save(folder / f"img{index:06d}.png")
    path = write_manifest(root, "cells", source={"kind": "local", "path": "src"},
                          tasks=["ungrounded_classification"], layout={"kind": "folder_per_class"}, metadata=BLOOD,
                          labels=CELL_CLASSES, questions={"options_name": "blood cell type", "n_options": 4})
    fetch_dataset(load_manifest(path), root / "data", repo_root=root)
    return DatasetJob(manifest_path=path, data_dir=root / "data")


def traced_peak(job: DatasetJob) -> int:
    gc.collect()
    tracemalloc.start()
    try:
        outcome = process_dataset(job)
        assert outcome.ok and outcome.ran == ["layout", "convert", "rows", "hashes"], outcome.error
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_worker_holds_a_chunk_of_samples_not_its_dataset(tmp_path, monkeypatch):
    """Before, each step held every sample (read whole from samples.json / converted.json, validated whole, the rows
    file's columns read whole): 8-13 KB per sample traced here, so 900 more samples added 7-12 MB. With chunks of
    64 samples (both datasets span many) ~1.3 KB per sample is left, in the hashes step: its table (a row per image,
    the step's output) and each image's hashes from the convert step (~1.1 KB together); the ids counted for the
    uniqueness check, the PNG paths state.json lists, and pydantic's cache of JSON strings (bounded at 16,384
    strings, still filling here) add ~0.1-0.2 KB each. 2.5 KB leaves room for the allocator's rounding."""
    small_chunks(monkeypatch, samples=64, metadata=128, hash_rows=128)
    monkeypatch.setattr(steps, "ROWS_PER_GROUP", 128)
    monkeypatch.setattr(sorted_runs, "MERGE_BATCH_ROWS", 64)
    small, large = 300, 1200
    traced_peak(tiny_dataset(tmp_path / "warm-up", 100))  # first-use caches: the taxonomy, pandera's schema
    small_peak = traced_peak(tiny_dataset(tmp_path / "small", small))
    large_peak = traced_peak(tiny_dataset(tmp_path / "large", large))
    per_sample = (large_peak - small_peak) / (large - small)
    assert per_sample < 2_500, (small_peak, large_peak, per_sample)


@pytest.fixture
def built(tmp_path):
    mixed_repo(tmp_path)
    report = run_build(config_for(tmp_path))
    assert report.release_rows, report.failed
    return tmp_path, step_files(tmp_path / "data")


def rebuilt(root: Path) -> dict[str, list[str]]:
    report = run_build(config_for(root))
    assert report.release_rows, report.failed
    return {o.dataset_id: o.ran for o in report.datasets}


def test_a_no_op_rebuild_skips_every_step(built):
    root, _ = built
    assert all(ran == [] for ran in rebuilt(root).values())


@pytest.mark.parametrize("name, cut", [("samples.jsonl", "last line"), ("samples.jsonl", "trailer"),
                                       ("converted.jsonl", "last line"), ("converted.jsonl", "trailer"),
                                       ("converted.jsonl", "missing"), ("samples.jsonl", "missing")])
def test_a_torn_or_missing_step_file_is_made_again_not_trusted(built, name, cut):
    """state.json says the step is done, but its file was cut (in the middle of its last line, or exactly before
    its trailer, which reads as a shorter dataset) or lost: the step runs again, and so does every later one."""
    root, before = built
    path = root / "data" / "work" / "pairs" / name
    text = path.read_text(encoding="utf-8")
    *records, trailer = text.splitlines(keepends=True)
    if cut == "last line":
        path.write_text("".join(records)[:-20], encoding="utf-8")
    elif cut == "trailer":
        path.write_text("".join(records), encoding="utf-8")
    else:
        path.unlink()
    assert not is_complete(path)
    ran = rebuilt(root)
    first = ["layout", "select", "convert", "rows", "hashes"] if name == "samples.jsonl" else ["convert", "rows", "hashes"]
    assert ran == {"table": [], "pairs": first, "lint": []}
    assert step_files(root / "data") == before
    assert all(ran == [] for ran in rebuilt(root).values())


def test_a_step_killed_before_its_rename_leaves_no_file_a_later_run_trusts(built):
    """A worker killed while it wrote converted.jsonl leaves the temporary beside it and no state for the step (the
    state is recorded after the rename): the next build removes the temporary and converts again."""
    root, before = built
    work = root / "data" / "work" / "pairs"
    half = "".join((work / "converted.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)[:3])
    (work / "converted.jsonl").unlink()
    (work / ".converted.jsonl.0badf00d.tmp").write_text(half[:-7], encoding="utf-8")
    state = json.loads((work / "state.json").read_text(encoding="utf-8"))
    kept = {"layout": state["layout"], "select": state["select"]}  # the steps before the convert step
    (work / "state.json").write_text(json.dumps(kept), encoding="utf-8")
    assert rebuilt(root)["pairs"] == ["convert", "rows", "hashes"]
    assert step_files(root / "data") == before
    assert not (work / ".converted.jsonl.0badf00d.tmp").exists()
    assert StepState(work / "state.json").is_fresh("convert", state["convert"]["inputs"])


def test_record_lines_with_nan_or_huge_numbers_read_as_json_reads_them(tmp_path):
    """orjson reads the lines, json what orjson refuses: NaN/Infinity (json.dumps writes them) and integers
    beyond 64 bits; a conversion record with a NaN window survives the round trip."""
    records = [{"window": [float("nan"), float("inf")], "id": "a"}, {"big": 2 ** 70}, ["x", {"y": 1.5}]]
    with LinesWriter(tmp_path / "records.jsonl") as out:
        for record in records:
            out.write(json.dumps(record))
    parsed = [parse_record(line) for line in read_lines(tmp_path / "records.jsonl")]
    assert np.isnan(parsed[0]["window"][0]) and parsed[0]["window"][1] == float("inf") and parsed[0]["id"] == "a"
    assert parsed[1:] == records[1:]
