"""The streaming writer produces byte for byte what the writer before it did (golden SHA256SUMS).

`golden_sha256sums.json` holds the SHA256SUMS of releases written from the `built` fixture by the
writer as of commit 953bcb4, which materialised every record of a config before writing; the
cases cover one shard per config, many shards, and several row groups per shard. Since then the exclusions.csv
line has changed (the file gained the duplicate step's columns `duplicate_of` and `distance`), the data and
croissant.json lines with each new question prototype version (the rows' questions changed, not the writer), and
croissant.json's once more when the writer declared list columns `isArray` (boxes as integers) and wrote one
`prov:wasDerivedFrom` node per source (the shards unchanged). Questions v7 added the closed-form question columns
(README.md and croissant.json describe them) and placed closed detection's wrong boxes on the image's content clear
of every instance, which leaves one gland detection row of the fixture without room: it became an exclusion, so
exclusions.csv, stats/ and build_info.json changed with it. README.md's when the card gained its
Versions and Citation sections.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mmbu.build import sorted_runs
from mmbu.build.duplicates.check import image_ids, keep_rows
from mmbu.build.release import rows as release_rows
from mmbu.build.release import stream
from mmbu.build.release import verify_sha256sums, write_release
from mmbu.build.release.checksums import SUMS_NAME
from mmbu.build.release.rows import RowsFiles
from mmbu.build.sorted_runs import SortedRuns
from mmbu.build.steps import ROWS_ORDER, write_rows_file

GOLDEN = json.loads((Path(__file__).with_name("golden_sha256sums.json")).read_text(encoding="utf-8"))
BUILD_INFO = {"created": "2026-01-01T00:00:00+00:00", "seeds": {"questions": 1}}
CASES = {"default": {}, "small_shards": {"max_shard_bytes": 2_000},
         "small_row_groups": {"max_shard_bytes": 6_000, "max_row_group_bytes": 1_500}}


@pytest.mark.parametrize("small_batches", [False, True])
@pytest.mark.parametrize("case", sorted(CASES))
def test_release_is_byte_identical_to_the_pre_streaming_writer(built, tmp_path, monkeypatch, case, small_batches):
    if small_batches:  # rows read 4 at a time and row groups built from Arrow batches of 3 rows
        monkeypatch.setattr(release_rows, "ROWS_PER_CHUNK", 4)
        monkeypatch.setattr(release_rows, "ROWS_PER_BATCH", 3)
    out = tmp_path / case
    write_release(built["rows_by_task"], out, built["manifests"], BUILD_INFO, exclusions=built["exclusions"],
                  **CASES[case])
    assert verify_sha256sums(out) == []
    assert (out / SUMS_NAME).read_text(encoding="utf-8").splitlines() == GOLDEN[case]


def rows_files(built, folder: Path, parts: int = 3) -> dict[str, RowsFiles]:
    """The fixture's rows as the build hands them to the release: per-file rows.parquet written by the rows step's
    writer (two chunks each), every file holding every task, rows dealt to the files at random so that their
    sample ids interleave."""
    rows = pd.concat(built["rows_by_task"].values(), ignore_index=True)
    rows = rows.iloc[np.random.default_rng(5).permutation(len(rows))].reset_index(drop=True)
    folder.mkdir()
    paths = []
    for part in range(parts):
        mine = rows.iloc[part::parts].reset_index(drop=True)
        paths.append(folder / f"part{part}.parquet")
        with SortedRuns(paths[-1], ROWS_ORDER) as runs:
            runs.add(mine.iloc[: len(mine) // 2])
            runs.add(mine.iloc[len(mine) // 2:])
            write_rows_file(runs, paths[-1])
    firsts = sorted(pd.read_parquet(p, columns=["sample_id"])["sample_id"].min() for p in paths)
    lasts = sorted(pd.read_parquet(p, columns=["sample_id"])["sample_id"].max() for p in paths)
    assert firsts[-1] < lasts[0]  # every file's ids reach into every other's
    return {task: RowsFiles(tuple((str(p), frozenset()) for p in paths), task, len(frame))
            for task, frame in built["rows_by_task"].items()}


@pytest.mark.parametrize("small_batches", [False, True])
@pytest.mark.parametrize("case", sorted(CASES))
def test_release_streamed_from_rows_files_is_byte_identical_to_the_pre_streaming_writer(built, tmp_path, monkeypatch,
                                                                                        case, small_batches):
    """The build's path (rows files merged by sample id, rows kept as Arrow columns, counts aggregated as they are
    checked) writes the shards, card, statistics, croissant and checksums the writer of 953bcb4 wrote from one
    DataFrame per config."""
    if small_batches:  # rows files read 3 rows at a time and merged 2 at a time
        monkeypatch.setattr(stream, "ROWS_PER_CHUNK", 3)
        monkeypatch.setattr(sorted_runs, "MERGE_BATCH_ROWS", 2)
    out = tmp_path / case
    write_release(rows_files(built, tmp_path / "rows"), out, built["manifests"], BUILD_INFO,
                  exclusions=built["exclusions"], **CASES[case])
    assert verify_sha256sums(out) == []
    assert (out / SUMS_NAME).read_text(encoding="utf-8").splitlines() == GOLDEN[case]


def test_streamed_exclusions_and_duplicate_drops_are_those_of_the_rows_written_at_once(built, tmp_path):
    """Rows whose image is gone, whose mask is not a PNG, whose box holds a NaN, and rows the duplicate check
    dropped: the release from rows files excludes and drops the same rows, in the same words, as the per-row
    writer given the same rows in one DataFrame per config (every file of both releases byte-identical)."""
    broken = tmp_path / "broken"
    rows = {task: frame.copy() for task, frame in built["rows_by_task"].items()}
    gone, not_png = broken / "gone.png", broken / "not-a-png.png"
    broken.mkdir()
    not_png.write_bytes(b"GIF89a not a png")
    rows["ungrounded_classification"].loc[2, "image"] = str(gone)
    masked = rows["mask_grounded_classification"]
    masked.loc[masked.index[1], "mask"] = str(not_png)
    boxed = rows["box_grounded_classification"]
    boxed.at[boxed.index[2], "boxes"] = [[1.0, float("nan"), 3.0, 4.0]]
    files = rows_files({"rows_by_task": rows}, tmp_path / "rows")
    ungrounded = rows["ungrounded_classification"]
    drops = {(image_ids(ungrounded).iloc[k], "ungrounded_classification") for k in (0, len(ungrounded) - 1)}
    drops.add((image_ids(rows["object_detection"]).iloc[0], "object_detection"))
    files = {task: RowsFiles(tuple((p, frozenset(drops)) for p, _ in f.parts), task, f.count)
             for task, f in files.items()}
    kept = {task: keep_rows(frame, drops).reset_index(drop=True) for task, frame in rows.items()}
    streamed = write_release(files, tmp_path / "streamed", built["manifests"], BUILD_INFO,
                             max_shard_bytes=6_000, max_row_group_bytes=1_500)
    at_once = write_release(kept, tmp_path / "at-once", built["manifests"], BUILD_INFO,
                            max_shard_bytes=6_000, max_row_group_bytes=1_500)
    assert [e.reason for e in streamed.exclusions] == [e.reason for e in at_once.exclusions]
    assert {e.reason.split(" ")[0] for e in streamed.exclusions} >= {"the", "cannot"}
    assert len(streamed.exclusions) == 3 and streamed.rows == at_once.rows
    assert ((tmp_path / "streamed" / SUMS_NAME).read_text(encoding="utf-8")
            == (tmp_path / "at-once" / SUMS_NAME).read_text(encoding="utf-8"))


@pytest.mark.parametrize("small_batches", [False, True])
def test_a_config_whose_every_image_is_unusable_is_excluded_row_by_row_and_the_others_are_written(
        built, tmp_path, monkeypatch, small_batches):
    """A batch of rows none of whose PNGs can be used (all gone: a data folder whose files were replaced) is
    excluded row by row, as the per-row writer does, instead of failing the config (an empty list of positions is a
    null-typed Arrow array, which `take` refuses)."""
    if small_batches:
        monkeypatch.setattr(stream, "ROWS_PER_CHUNK", 3)
    rows = {task: frame.copy() for task, frame in built["rows_by_task"].items()}
    ungrounded = rows["ungrounded_classification"]
    ungrounded["image"] = [str(tmp_path / "gone" / f"{k}.png") for k in range(len(ungrounded))]
    streamed = write_release(rows_files({"rows_by_task": rows}, tmp_path / "rows"), tmp_path / "streamed",
                             built["manifests"], BUILD_INFO)
    at_once = write_release(rows, tmp_path / "at-once", built["manifests"], BUILD_INFO)
    assert len(streamed.exclusions) == len(ungrounded) > 0
    assert [e.reason for e in streamed.exclusions] == [e.reason for e in at_once.exclusions]
    assert streamed.rows == at_once.rows and "ungrounded_classification" not in {
        task for task, count in streamed.rows.items() if count}
    assert ((tmp_path / "streamed" / SUMS_NAME).read_text(encoding="utf-8")
            == (tmp_path / "at-once" / SUMS_NAME).read_text(encoding="utf-8"))


def test_a_config_that_fails_while_written_leaves_no_shard_behind(built, tmp_path, monkeypatch):
    """Row groups are written as the check closes them, under provisional names: a failure in a later shard leaves
    neither the earlier shard (written whole under its provisional name) nor the failing one in the config's folder,
    and the error reaches the caller."""
    files = rows_files(built, tmp_path / "rows")["ungrounded_classification"]
    made = []

    def failing_in_the_third_shard(rows, scratch):  # the first shard is then complete, the second open
        if len(made) == 2:
            raise OSError("disk full")
        made.append(rows.num_rows)
        return release_table(rows, scratch)

    release_table = stream.release_table
    monkeypatch.setattr(stream, "release_table", failing_in_the_third_shard)
    config_dir = tmp_path / "config"
    with pytest.raises(OSError, match="disk full"):
        stream.write_files(files, config_dir, max_shard_bytes=2_000)  # one row group per shard
    assert len(made) == 2 and sorted(p.name for p in config_dir.iterdir()) == []


def test_row_groups_are_written_before_the_last_row_is_checked(built, tmp_path, monkeypatch):
    """One pass: the first row group reaches its shard while later rows are still unread (the check of all rows first
    would have read every batch before writing any), and the shards get their final names only at the end."""
    monkeypatch.setattr(stream, "ROWS_PER_CHUNK", 3)
    monkeypatch.setattr(sorted_runs, "MERGE_BATCH_ROWS", 2)
    files = rows_files(built, tmp_path / "rows")["ungrounded_classification"]
    events = []
    checking, writing = stream._check, stream.release_table
    monkeypatch.setattr(stream, "_check", lambda table, checked: events.append("check") or checking(table, checked))
    monkeypatch.setattr(stream, "release_table", lambda rows, scratch: events.append("write") or writing(rows, scratch))
    shards, checked = stream.write_files(files, tmp_path / "config", max_shard_bytes=6_000, max_row_group_bytes=1_500)
    assert events.index("write") < len(events) - 1 - events[::-1].index("check")
    assert events.count("write") == sum(len(groups) for groups in checked.layout.shards) > 2
    assert [p.name for p in shards] == [f"test-{k:05d}-of-{len(shards):05d}.parquet" for k in range(len(shards))]
    assert sorted(p.name for p in (tmp_path / "config").iterdir()) == [p.name for p in shards]


def test_row_groups_share_one_png_buffer():
    """Each row group's PNGs are read into the memory the previous group's used (grown when a group needs more, with
    room to spare), not into fresh pages."""
    scratch = stream.Scratch()
    first = scratch.get(1_000)
    assert np.shares_memory(first, scratch.get(800)) and len(scratch.get(800)) == 800
    grown = scratch.get(1_100)
    assert not np.shares_memory(first, grown) and np.shares_memory(grown, scratch.get(1_250))
