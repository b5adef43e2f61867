"""One writer (`stream.write_files`) writes every release, byte for byte the same (golden SHA256SUMS).

`golden_sha256sums.json` holds the SHA256SUMS of the releases written from the `built` fixture, whether its rows come
as the build hands them (the rows step's rows.parquet files) or as a DataFrame per config (the public API, which
writes them into a rows file first); the cases cover one shard per config, many shards, and several row groups per
shard, read in small batches or large. The sums change only when what a release holds changes (the rows' questions,
the card's words, the shards' encoding): the commit that changes them says why.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from mmbu.build import sorted_runs
from mmbu.build.duplicates.check import image_ids, keep_rows
from mmbu.build.release import stream
from mmbu.build.release import verify_sha256sums, write_release
from mmbu.build.release.checksums import SUMS_NAME
from mmbu.build.release.rows import RowsFiles

GOLDEN = json.loads((Path(__file__).with_name("golden_sha256sums.json")).read_text(encoding="utf-8"))
BUILD_INFO = {"created": "2026-01-01T00:00:00+00:00", "seeds": {"questions": 1}}
CASES = {"default": {}, "small_shards": {"max_shard_bytes": 2_000},
         "small_row_groups": {"max_shard_bytes": 6_000, "max_row_group_bytes": 1_500}}


@pytest.mark.parametrize("small_batches", [False, True])
@pytest.mark.parametrize("case", sorted(CASES))
def test_a_release_given_as_dataframes_is_the_golden_one(built, tmp_path, monkeypatch, case, small_batches):
    if small_batches:  # the rows file read 4 rows at a time
        monkeypatch.setattr(stream, "ROWS_PER_CHUNK", 4)
    out = tmp_path / case
    write_release(built["rows_by_task"], out, built["manifests"], BUILD_INFO, exclusions=built["exclusions"],
                  **CASES[case])
    assert verify_sha256sums(out) == []
    assert (out / SUMS_NAME).read_text(encoding="utf-8").splitlines() == GOLDEN[case]


@pytest.mark.parametrize("small_batches", [False, True])
@pytest.mark.parametrize("case", sorted(CASES))
def test_a_release_given_as_rows_files_is_the_golden_one(built, rows_files_of, tmp_path, monkeypatch, case,
                                                          small_batches):
    """The build's path: rows files merged by image and sample id, rows kept as Arrow columns, counts aggregated as
    they are checked."""
    if small_batches:  # rows files read 3 rows at a time and merged 2 at a time
        monkeypatch.setattr(stream, "ROWS_PER_CHUNK", 3)
        monkeypatch.setattr(sorted_runs, "MERGE_BATCH_ROWS", 2)
    out = tmp_path / case
    write_release(rows_files_of(built["rows_by_task"], tmp_path / "rows"), out, built["manifests"], BUILD_INFO,
                  exclusions=built["exclusions"], **CASES[case])
    assert verify_sha256sums(out) == []
    assert (out / SUMS_NAME).read_text(encoding="utf-8").splitlines() == GOLDEN[case]


def test_unusable_rows_and_duplicate_drops_are_the_same_from_rows_files_and_from_dataframes(built, rows_files_of,
                                                                                            tmp_path):
    """Rows whose image is gone, whose mask is not a PNG, whose box holds a NaN, and rows the duplicate check
    dropped: the release from the rows step's files excludes and drops the same rows, in the same words, as the
    release given the same rows in one DataFrame per config (every file of both releases byte-identical)."""
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
    files = rows_files_of(rows, tmp_path / "rows")
    ungrounded = rows["ungrounded_classification"]
    drops = {(image_ids(ungrounded).iloc[k], "ungrounded_classification") for k in (0, len(ungrounded) - 1)}
    drops.add((image_ids(rows["object_detection"]).iloc[0], "object_detection"))
    files = {task: RowsFiles(tuple((p, frozenset(drops)) for p, _ in f.parts), task, f.count)
             for task, f in files.items()}
    kept = {task: keep_rows(frame, drops).reset_index(drop=True) for task, frame in rows.items()}
    from_files = write_release(files, tmp_path / "from_files", built["manifests"], BUILD_INFO,
                             max_shard_bytes=6_000, max_row_group_bytes=1_500)
    from_frames = write_release(kept, tmp_path / "from-frames", built["manifests"], BUILD_INFO,
                            max_shard_bytes=6_000, max_row_group_bytes=1_500)
    assert [e.reason for e in from_files.exclusions] == [e.reason for e in from_frames.exclusions]
    assert {e.reason.split(" ")[0] for e in from_files.exclusions} >= {"the", "cannot"}
    assert len(from_files.exclusions) == 3 and from_files.rows == from_frames.rows
    assert ((tmp_path / "from_files" / SUMS_NAME).read_text(encoding="utf-8")
            == (tmp_path / "from-frames" / SUMS_NAME).read_text(encoding="utf-8"))


@pytest.mark.parametrize("small_batches", [False, True])
def test_a_config_whose_every_image_is_unusable_is_excluded_row_by_row_and_the_others_are_written(
        built, rows_files_of, tmp_path, monkeypatch, small_batches):
    """A batch of rows none of whose PNGs can be used (all gone: a data folder whose files were replaced) is
    excluded row by row instead of failing the config (an empty list of positions is a null-typed Arrow array, which
    `take` refuses)."""
    if small_batches:
        monkeypatch.setattr(stream, "ROWS_PER_CHUNK", 3)
    rows = {task: frame.copy() for task, frame in built["rows_by_task"].items()}
    ungrounded = rows["ungrounded_classification"]
    ungrounded["image"] = [str(tmp_path / "gone" / f"{k}.png") for k in range(len(ungrounded))]
    from_files = write_release(rows_files_of(rows, tmp_path / "rows"), tmp_path / "from_files",
                             built["manifests"], BUILD_INFO)
    from_frames = write_release(rows, tmp_path / "from-frames", built["manifests"], BUILD_INFO)
    assert len(from_files.exclusions) == len(ungrounded) > 0
    assert [e.reason for e in from_files.exclusions] == [e.reason for e in from_frames.exclusions]
    assert from_files.rows == from_frames.rows and "ungrounded_classification" not in {
        task for task, count in from_files.rows.items() if count}
    assert ((tmp_path / "from_files" / SUMS_NAME).read_text(encoding="utf-8")
            == (tmp_path / "from-frames" / SUMS_NAME).read_text(encoding="utf-8"))


def test_a_config_that_fails_while_written_leaves_no_shard_behind(built, rows_files_of, tmp_path, monkeypatch):
    """Row groups are written as the check closes them, under provisional names: a failure in a later shard leaves
    neither the earlier shard (written whole under its provisional name) nor the failing one in the config's folder,
    and the error reaches the caller."""
    files = rows_files_of(built["rows_by_task"], tmp_path / "rows")["ungrounded_classification"]
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


def test_row_groups_are_written_before_the_last_row_is_checked(built, rows_files_of, tmp_path, monkeypatch):
    """One pass: the first row group reaches its shard while later rows are still unread (the check of all rows first
    would have read every batch before writing any), and the shards get their final names only at the end."""
    monkeypatch.setattr(stream, "ROWS_PER_CHUNK", 3)
    monkeypatch.setattr(sorted_runs, "MERGE_BATCH_ROWS", 2)
    files = rows_files_of(built["rows_by_task"], tmp_path / "rows")["ungrounded_classification"]
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
