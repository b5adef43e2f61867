"""run_all: items consumed lazily (the fetch loop overlaps with the workers), failures returned, indices kept."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mmbu.build.executors import WorkerDied, run_all


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


def test_a_worker_killed_outright_costs_only_its_own_item():
    from support.executor_items import die_or_echo

    items = ["a", "b", "die-here", "c", "d", "e"]
    results = dict(run_all(die_or_echo, iter(items), jobs=2))
    assert sorted(results) == list(range(6))
    assert isinstance(results[2], WorkerDied) and "worker process building it died" in str(results[2])
    assert [results[i] for i in (0, 1, 3, 4, 5)] == ["A", "B", "C", "D", "E"]


def test_workers_stop_when_their_parent_is_killed(tmp_path):
    """kill -9 of the build process must not leave its workers converting for minutes."""
    script = (
        "import sys; from mmbu.build.executors import run_all; from support.executor_items import record_pid_and_sleep\n"
        f"list(run_all(record_pid_and_sleep, iter([{str(tmp_path)!r}] * 2), jobs=2))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    parent = subprocess.Popen([sys.executable, "-c", script], env=env)
    try:
        deadline = time.monotonic() + 60
        while len(list(tmp_path.glob("*.pid"))) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        workers = [int(p.stem) for p in tmp_path.glob("*.pid")]
        assert len(workers) == 2
        parent.kill()
        parent.wait()
        deadline = time.monotonic() + 10
        while any(_alive(pid) for pid in workers) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(_alive(pid) for pid in workers)
    finally:
        parent.kill()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie (exited, not yet reaped by init) is gone for our purpose
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False



def test_workers_leave_what_they_inherited_out_of_their_collections_and_collect_less_often():
    import gc

    from mmbu.build.executors import WORKER_GC_THRESHOLDS
    from support.executor_items import garbage_collector_state

    before = gc.get_threshold()
    inherited = len(gc.get_objects())  # the parent's tracked objects: never garbage in a worker
    states = [state for _, state in run_all(garbage_collector_state, range(4), jobs=2)]
    assert {threshold for threshold, _ in states} == {WORKER_GC_THRESHOLDS}
    assert min(frozen for _, frozen in states) >= inherited * 0.9
    # the parent's collector is as it was: nothing left frozen, its thresholds untouched
    assert gc.get_freeze_count() == 0 and gc.get_threshold() == before
