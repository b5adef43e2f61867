"""`mmbu build` killed (SIGKILL, the whole process group: what an OOM killer or a lost node does) while it converts,
makes rows or writes the release, and its resume killed too, resumes to the release a build never interrupted
writes, file for file; and whatever release folder a killed build leaves is whole (its SHA256SUMS hold)."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from mmbu.build.release import verify_sha256sums

ROOT = Path(__file__).resolve().parents[2]
# the moments a fresh build is killed at: as soon as the first of its files of each stage appears
MOMENTS = {
    "converting": lambda data: any((data / "work").glob("*/images/*.png")),
    "making rows": lambda data: any((data / "work").glob("*/rows.parquet")),
    "writing the release": lambda data: any(data.glob(".release.tmp-*/data/*/*.parquet")),
}


def _build(data: Path) -> subprocess.Popen:
    # its own copy of the lock: a build killed while it pins must not leave anything in the repository
    lock = data.with_name(data.name + ".lock")
    if not lock.exists():
        shutil.copyfile(ROOT / "manifests" / "manifests.lock", lock)
    command = [sys.executable, "-m", "mmbu", "build", "--manifests", str(ROOT / "manifests" / "demo"),
               "--mirror", str(ROOT / "manifests" / "mirror"), "--data", str(data), "--lock", str(lock), "--jobs", "2"]
    data.mkdir(parents=True, exist_ok=True)
    with open(data.with_name(data.name + ".log"), "ab") as log:  # a file, not a pipe nobody reads
        return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=log, start_new_session=True, cwd=ROOT)


def _release_digests(release: Path) -> dict[str, str]:
    """Every release file's sha256 (from SHA256SUMS); build_info.json without its creation time and its inputs hash
    (which covers the rows files, and they name the data folder's files by absolute path)."""
    lines = (release / "SHA256SUMS").read_text(encoding="utf-8").splitlines()
    digests = {name: digest for digest, name in (line.split("  ", 1) for line in lines)}
    info = json.loads((release / "build_info.json").read_text(encoding="utf-8"))
    del info["created"], info["inputs_hash"]
    digests["build_info.json"] = json.dumps(info, sort_keys=True)
    return digests


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory) -> dict[str, str]:
    """The digests of the release a build never interrupted writes (one build per test process)."""
    reference = tmp_path_factory.mktemp("killed-anywhere") / "reference"
    assert _build(reference).wait(timeout=300) == 0, _log(reference)
    return _release_digests(reference / "release")


# one test per moment, so that the three can run on different cores
@pytest.mark.parametrize("moment", list(MOMENTS))
def test_a_build_killed_anywhere_and_its_resume_killed_too_ends_with_the_uninterrupted_release(tmp_path, uninterrupted,
                                                                                                moment):
    reached = MOMENTS[moment]
    data = tmp_path / moment.replace(" ", "-")
    assert _killed_when(data, reached), f"the build ended before {moment}"
    _killed_when(data, lambda _: True)  # the resume, killed at once, wherever its start-up has got to
    _killed_when(data, reached)  # and again at the same stage if the resume reaches it again
    assert _build(data).wait(timeout=300) == 0, _log(data)
    assert _release_digests(data / "release") == uninterrupted, f"killed while {moment}"
    assert verify_sha256sums(data / "release") == []
    leftovers = [p for p in data.rglob("*") if ".tmp" in p.name or ".staging" in p.name]
    assert leftovers == [], f"killed while {moment}"


def _killed_when(data: Path, reached: Callable[[Path], bool]) -> bool:
    """A build into `data`, killed with its workers as soon as `reached(data)` holds; True if it was killed."""
    attempt = _build(data)
    while attempt.poll() is None:
        if reached(data):
            os.killpg(attempt.pid, signal.SIGKILL)
            attempt.wait(timeout=60)
            break
        time.sleep(0.005)
    killed = attempt.returncode == -signal.SIGKILL
    # a release folder a killed build leaves behind is the old one or the new one, never half of either
    if (data / "release").exists():
        assert verify_sha256sums(data / "release") == [], data.name
    return killed


def _log(data: Path) -> str:
    return data.with_name(data.name + ".log").read_text(errors="replace")
