"""run_all: items consumed lazily (the fetch loop overlaps with the workers), failures returned, indices kept."""
from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from mmbu.build.executors import run_all


def wait_for(path: Path, seconds: float = 30.0) -> bool:
    deadline = time.monotonic() + seconds
    while not path.exists():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


@pytest.mark.parametrize("jobs", [1, 2])
def test_each_item_runs_before_the_next_is_produced(tmp_path, jobs):
    folders = [tmp_path / f"item{i}" for i in range(4)]
    produced_after_previous_ran = []

    def produce():
        for index, folder in enumerate(folders):
            if index:  # the previous item must already be running in a worker, not waiting for the whole list
                produced_after_previous_ran.append(wait_for(folders[index - 1]))
            yield str(folder)

    results = dict(run_all(os.mkdir, produce(), jobs=jobs))
    assert produced_after_previous_ran == [True, True, True]
    assert sorted(results) == [0, 1, 2, 3] and all(value is None for value in results.values())
    assert all(folder.is_dir() for folder in folders)


def test_a_failing_item_comes_back_as_its_exception(tmp_path):
    (tmp_path / "taken").mkdir()
    items = [str(tmp_path / "new"), str(tmp_path / "taken"), str(tmp_path / "other")]
    results = dict(run_all(os.mkdir, iter(items), jobs=2))
    assert isinstance(results[1], FileExistsError)
    assert results[0] is None and results[2] is None
    assert (tmp_path / "new").is_dir() and (tmp_path / "other").is_dir()
