"""Conversion workers that cannot read outside their dataset's folder (issue 32, point 1, defence in depth):
Linux Landlock through `mmbu.core.landlock`, used by `process_dataset`. This machine's kernel has Landlock (the
first test says so); where a kernel has none, `run_confined` runs the function unconfined and the tests check
that instead."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from support.build_repo import config_for, make_repo

from mmbu.build import steps
from mmbu.build.pipeline import read_manifests
from mmbu.build.steps import DatasetJob, process_dataset
from mmbu.core.landlock import landlock_abi, run_confined

CONFINED = landlock_abi() > 0


def _read(path: str) -> str:
    return Path(path).read_text()


def _libraries_after_the_restriction(_: object) -> str:
    """Modules and shared libraries first loaded inside the confined child, and a temporary file."""
    import sqlite3  # a C extension and libsqlite3, loaded now
    import tempfile
    import xml.dom.minidom

    import numpy as np
    from PIL import Image

    with tempfile.NamedTemporaryFile() as scratch:
        scratch.write(b"x")
    pixels = np.asarray(Image.fromarray(np.full((4, 4), 7, np.uint8)).resize((2, 2)))
    return f"{sqlite3.sqlite_version} {xml.dom.minidom.__name__} {int(pixels.sum())}"


def test_the_kernel_here_has_landlock():
    assert landlock_abi() >= 1  # uname -r: 6.x; where this fails, the tests below check the unconfined fallback


def test_a_confined_function_reads_its_folders_and_nothing_else(tmp_path):
    inside, outside = tmp_path / "dataset", tmp_path / "secret.txt"
    inside.mkdir()
    (inside / "a.txt").write_text("mine")
    outside.write_text("the machine's")
    assert run_confined(_read, str(inside / "a.txt"), [inside]) == "mine"
    for path in (outside, Path("/etc/hostname"), Path(os.path.expanduser("~")) / ".bashrc"):
        if not path.exists():
            continue
        if CONFINED:
            with pytest.raises(PermissionError):
                run_confined(_read, str(path), [inside])
        else:
            assert run_confined(_read, str(path), [inside]) == path.read_text()


def test_python_libraries_and_temporary_files_still_work_when_confined(tmp_path):
    result = run_confined(_libraries_after_the_restriction, None, [], scratch=tmp_path / "scratch")
    assert result.endswith("xml.dom.minidom 28")


def test_a_parser_gap_costs_its_dataset_and_no_file_of_the_machine(tmp_path, monkeypatch):
    """A layout that a hostile file leads to open a file outside the dataset (simulated: the reader is replaced by
    one that does) fails that dataset in one sentence; the file's content appears nowhere."""
    make_repo(tmp_path)
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET")
    config = config_for(tmp_path)
    manifest = next(m for m in read_manifests(config).manifests.values() if m.id == "cells")
    from mmbu.build.fetch import fetch_dataset

    assert fetch_dataset(manifest, config.data_dir, repo_root=tmp_path).ok

    def led_astray(manifest, raw_dir, sink, cache):
        return len(Path(secret).read_text()), []

    monkeypatch.setattr(steps, "read_samples_into", led_astray)
    outcome = process_dataset(DatasetJob(manifest_path=tmp_path / "manifests" / "datasets" / "cells.yaml",
                                         data_dir=config.data_dir.resolve(), manifest=manifest))
    if CONFINED:
        assert not outcome.ok and "PermissionError" in outcome.error and "secret.txt" in outcome.error
    else:
        assert "TOP-SECRET" not in (outcome.error or "")
    assert not list((config.data_dir / "work" / "cells").glob(".mmbu-tmp"))
