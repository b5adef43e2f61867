"""Whole builds against hostile input and faults (issue 16): each costs its item or its dataset, never the
build, and a re-run resumes."""
from __future__ import annotations

import csv
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
from PIL import Image
from support.build_repo import config_for, make_repo
from support.faulty_disk import full_disk, grow, read_only

from mmbu.build import pipeline
from mmbu.build.data_lock import data_folder_lock
from mmbu.build.pipeline import run_build
from mmbu.build.release import verify_sha256sums
from mmbu.build.steps import process_dataset


def test_a_file_name_that_is_not_utf8_is_one_exclusion_and_the_dataset_builds(tmp_path):
    make_repo(tmp_path)
    odd = tmp_path / "src" / "cells" / "lym" / os.fsdecode(b"lym\xe9-latin1.png")
    Image.fromarray(np.full((40, 48, 3), 77, np.uint8)).save(odd)

    report = run_build(config_for(tmp_path))

    assert report.failed == [] and report.exit_code == 1  # 1: an item was excluded
    assert report.release_rows["ungrounded_classification"] == 8  # the other eight cells
    with (tmp_path / "data" / "release" / "exclusions.csv").open(encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert [(r["dataset_id"], r["item"]) for r in rows] == [("cells", "lym/lym\\xe9-latin1.png")]
    assert "not valid UTF-8" in rows[0]["reason"]
    again = run_build(config_for(tmp_path))
    assert again.failed == [] and again.release_rows == report.release_rows


def test_a_second_build_on_a_busy_data_folder_is_refused_at_once_naming_the_holder(tmp_path):
    make_repo(tmp_path)
    data = tmp_path / "data"
    with data_folder_lock(data, "mmbu build"):
        for command in (["build", "--manifests", str(tmp_path / "manifests" / "datasets")],
                        ["fetch", "--manifests", str(tmp_path / "manifests" / "datasets")]):
            result = subprocess.run([sys.executable, "-m", "mmbu", *command, "--data", str(data)],
                                    capture_output=True, text=True, timeout=120, cwd=tmp_path)
            assert result.returncode == 2, result.stderr
            assert f"{data} is in use by mmbu build (pid {os.getpid()} on {socket.gethostname()}" in result.stderr
            assert "Traceback" not in result.stderr
    assert not (data / "release").exists() and not (data / "raw").exists()  # the refused runs touched nothing
    # the lock died with its holder: a lock file naming a dead process does not block anyone
    assert json.loads((data / ".mmbu.lock").read_text())["pid"] == os.getpid()
    assert run_build(config_for(tmp_path)).failed == []


def test_temporaries_left_by_a_killed_build_are_removed_by_the_next(tmp_path):
    make_repo(tmp_path)
    data = tmp_path / "data"
    run_build(config_for(tmp_path))
    # (none in work/<id>/images: the convert step writes its PNGs in place, so it never leaves a temporary there)
    leftovers = [data / ".release.tmp-4242" / "data", data / "work" / "cells" / ".rows.parquet.1a2b3c4d.tmp",
                 data / "work" / "cells" / ".samples.json.5e6f.tmp", data / ".build-report.json.tmp",
                 data / "raw" / ".cells.staging-77" / "a.png"]
    for path in leftovers:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"half-written")
    sums = (data / "release" / "SHA256SUMS").read_bytes()

    report = run_build(config_for(tmp_path))

    assert report.failed == []
    assert not any(path.exists() for path in leftovers)
    assert not (data / ".release.tmp-4242").exists() and not (data / "raw" / ".cells.staging-77").exists()
    assert (data / "release" / "SHA256SUMS").read_bytes() == sums


def _dies_on_nuclei(job):
    """Stands in for a worker the OOM killer ends while it builds one dataset."""
    if job.manifest_path.stem == "nuclei":
        signal.raise_signal(signal.SIGKILL)
    return process_dataset(job)


def test_a_build_worker_that_dies_costs_only_its_dataset_and_the_next_build_resumes(tmp_path, monkeypatch):
    make_repo(tmp_path)
    monkeypatch.setattr(pipeline, "process_dataset", _dies_on_nuclei)  # forked workers inherit the patch

    report = run_build(config_for(tmp_path, jobs=2))

    assert [o.dataset_id for o in report.datasets if not o.ok] == ["nuclei"]
    assert any("nuclei" in message and "worker process building it died" in message for message in report.failed)
    assert report.release_rows == {"ungrounded_classification": 8}
    assert json.loads((tmp_path / "data" / "build-report.json").read_text())["failed"]
    monkeypatch.undo()
    again = run_build(config_for(tmp_path, jobs=2))
    assert again.failed == [] and again.release_rows["object_detection"] == 4


def _mmbu(*args: str, preexec=None, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mmbu", *args], capture_output=True, text=True, timeout=300,
                          preexec_fn=preexec, cwd=cwd)


def test_a_build_on_a_full_disk_says_so_in_one_sentence_and_resumes_once_space_is_freed(tmp_path):
    make_repo(tmp_path)
    manifests = str(tmp_path / "manifests" / "datasets")
    with full_disk(tmp_path / "data", 300 * 1024) as (data, preexec):
        result = _mmbu("build", "--manifests", manifests, "--data", str(data), preexec=preexec, cwd=tmp_path)
        assert result.returncode in (1, 2), result.stderr
        assert "Traceback" not in result.stderr
        assert "the disk is full" in result.stderr or "file size limit" in result.stderr
        grow(data)
        again = _mmbu("build", "--manifests", manifests, "--data", str(data), cwd=tmp_path)
        assert again.returncode == 0, again.stderr
        assert not list(data.glob(".*.tmp-*")) and not list(data.rglob(".*.tmp"))
        assert verify_sha256sums(data / "release") == []


def test_convert_into_a_read_only_folder_or_onto_a_file_is_one_sentence(tmp_path):
    source = tmp_path / "a.png"
    Image.fromarray(np.full((8, 8), 50, np.uint8)).save(source)
    with read_only(tmp_path / "locked") as locked:
        result = _mmbu("convert", str(source), "--out", str(locked / "out"))
        assert result.returncode == 2 and "Traceback" not in result.stderr
        assert f"cannot write {locked / 'out'}" in result.stderr
        assert "read-only" in result.stderr or "permission denied" in result.stderr
    (tmp_path / "data").write_text("not a folder")
    make_repo(tmp_path / "repo")
    result = _mmbu("build", "--manifests", str(tmp_path / "repo" / "manifests" / "datasets"),
                   "--data", str(tmp_path / "data"))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert f"cannot write {tmp_path / 'data'}: a file is where a folder is needed" in result.stderr


def test_a_deeply_nested_manifest_costs_itself_and_the_others_fetch_and_build(tmp_path):
    make_repo(tmp_path)
    manifests = tmp_path / "manifests" / "datasets"
    (manifests / "deep.yaml").write_text("[" * 50_000 + "]" * 50_000)

    report = run_build(config_for(tmp_path))

    assert report.release_rows["ungrounded_classification"] == 8 and report.release_rows["object_detection"] == 4
    assert [message.split(":")[0] for message in report.failed] == [str(manifests / "deep.yaml")]
    assert "exceeded maximum nesting depth" in report.failed[0]
    fetch = _mmbu("fetch", "--manifests", str(manifests), "--data", str(tmp_path / "data2"), cwd=tmp_path)
    assert fetch.returncode == 1 and "Traceback" not in fetch.stderr
    assert (tmp_path / "data2" / "raw" / "cells").is_dir() and (tmp_path / "data2" / "raw" / "nuclei").is_dir()


def test_the_release_is_swapped_in_whole_and_a_half_done_swap_is_undone(tmp_path):
    from mmbu.build.data_lock import remove_stale_temporaries
    from mmbu.core.files import replace_folder

    old, new = tmp_path / "release", tmp_path / ".release.tmp-1"
    for folder, text in ((old, "old"), (new, "new")):
        folder.mkdir()
        (folder / "SHA256SUMS").write_text(text)
    replace_folder(new, old)
    assert (old / "SHA256SUMS").read_text() == "new" and not new.exists()
    # a build killed between the two renames of the fallback leaves only the set-aside old release
    os.replace(old, tmp_path / ".release.old-4242")
    remove_stale_temporaries(tmp_path)
    assert (old / "SHA256SUMS").read_text() == "new" and not (tmp_path / ".release.old-4242").exists()


def test_a_copied_data_folder_builds_from_its_own_files_never_from_the_folder_it_was_copied_from(tmp_path):
    make_repo(tmp_path)
    original = tmp_path / "data"
    first = run_build(config_for(tmp_path))
    copy = tmp_path / "moved" / "data"
    shutil.copytree(original, copy)  # copy2: sizes and mtimes kept, as `cp -a` or rsync -a would
    for png in (original / "work").rglob("*.png"):  # the old folder changes after the copy (another build)
        png.write_bytes(b"not the image the copy was made from")
    shutil.rmtree(copy / "release")

    report = run_build(config_for(tmp_path, data_dir=copy))

    assert report.failed == [] and report.exit_code == 0
    for rows in (copy / "work").glob("*/rows.parquet"):
        table = pq.read_table(rows, columns=["image", "mask", "image_path", "mask_path"])
        paths = [p for column in table.columns for p in column.to_pylist() if p is not None]
        assert paths and all(Path(p).is_relative_to(copy) for p in paths), rows
    assert verify_sha256sums(copy / "release") == []
    assert report.release_rows == first.release_rows
