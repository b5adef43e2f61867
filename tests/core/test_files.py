"""Atomic writes: the target holds the old bytes or the new ones, never a part; no temporary file is left."""
from __future__ import annotations

import json
import os
import stat

import pandas as pd
import pytest

from mmbu.core.files import FILE_MODE, atomic_file, atomic_path, write_bytes_atomic, write_json_atomic, \
    write_text_atomic


def leftovers(folder):
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


def test_a_stream_replaces_the_target_only_when_the_block_ends(tmp_path):
    target = tmp_path / "sub" / "report.jsonl"
    with atomic_file(target, "w", encoding="utf-8") as stream:
        stream.write('{"a": 1}\n')
        assert not target.exists()  # nothing under the final name while writing
    assert target.read_text(encoding="utf-8") == '{"a": 1}\n'
    assert leftovers(target.parent) == []


def test_an_exception_keeps_the_old_file_and_removes_the_temporary_one(tmp_path):
    target = tmp_path / "state.json"
    target.write_text("old", encoding="utf-8")
    with pytest.raises(RuntimeError), atomic_file(target, "w", encoding="utf-8") as stream:
        stream.write("half of the new")
        raise RuntimeError("killed")
    assert target.read_text(encoding="utf-8") == "old"
    assert leftovers(tmp_path) == []


def test_the_file_gets_the_permissions_open_would_give(tmp_path):
    path = write_bytes_atomic(tmp_path / "image.png", b"\x89PNG")
    assert stat.S_IMODE(os.stat(path).st_mode) == FILE_MODE  # not mkstemp's private 0600


def test_a_writer_that_wants_a_path_gets_one_beside_the_target(tmp_path):
    target = tmp_path / "rows.parquet"
    frame = pd.DataFrame({"sample_id": ["a", "b"], "boxes": [[[1, 2, 3, 4]], None]})
    with atomic_path(target) as temporary:
        assert temporary.parent == tmp_path and temporary.name.startswith(".rows.parquet.")
        frame.to_parquet(temporary, index=False)
    assert pd.read_parquet(target)["sample_id"].tolist() == ["a", "b"]
    with pytest.raises(ValueError), atomic_path(target) as temporary:
        temporary.write_bytes(b"not parquet")
        raise ValueError("the writer failed")
    assert pd.read_parquet(target)["sample_id"].tolist() == ["a", "b"]
    assert leftovers(tmp_path) == []


def test_text_and_json_helpers(tmp_path):
    assert write_text_atomic(tmp_path / "a.txt", "é\n").read_bytes() == "é\n".encode()
    write_json_atomic(tmp_path / "sorted.json", {"b": 1, "a": tmp_path})
    assert (tmp_path / "sorted.json").read_text(encoding="utf-8") == json.dumps(
        {"a": str(tmp_path), "b": 1}, indent=2) + "\n"
    write_json_atomic(tmp_path / "ordered.json", {"b": 1, "a": 2}, sort_keys=False)
    assert list(json.loads((tmp_path / "ordered.json").read_text(encoding="utf-8"))) == ["b", "a"]


def test_a_write_without_fsync_is_still_atomic_and_fsyncs_nothing(tmp_path, monkeypatch):
    synced = []
    monkeypatch.setattr(os, "fsync", lambda fd: synced.append(fd))
    target = tmp_path / "image.png"
    write_bytes_atomic(target, b"old")
    assert len(synced) == 1
    with pytest.raises(RuntimeError), atomic_file(target, "wb", durable=False) as stream:
        stream.write(b"half")
        raise RuntimeError("killed mid-write")
    assert target.read_bytes() == b"old" and [p.name for p in tmp_path.iterdir()] == ["image.png"]
    write_json_atomic(tmp_path / "sidecar.json", {"key": 1}, durable=False)
    write_bytes_atomic(target, b"new", durable=False)
    assert target.read_bytes() == b"new" and json.loads((tmp_path / "sidecar.json").read_text()) == {"key": 1}
    assert len(synced) == 1
