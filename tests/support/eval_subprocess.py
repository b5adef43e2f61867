"""`mmbu eval run` in a child process, for the tests that kill or interrupt it mid-run."""
from __future__ import annotations

import sys
import time
from pathlib import Path


# Ctrl-C to the process group right after the run file's first append has been fsynced, from inside the fsync: the
# moment a real Ctrl-C most often lands in (the fsync is the parent's longest step), made certain. It fires once.
CTRL_C_AFTER_FIRST_APPEND = """
import os, signal
real_fsync = os.fsync
def fsync_then_ctrl_c(fd):
    real_fsync(fd)
    if os.readlink(f"/proc/self/fd/{fd}").endswith("/predictions.jsonl"):
        os.fsync = real_fsync
        os.killpg(0, signal.SIGINT)
os.fsync = fsync_then_ctrl_c
"""


def eval_run_command(release: Path, base_url: str, runs: Path, *extra: str, prelude: str = "") -> list[str]:
    """The command line of `mmbu eval run` for Qwen3-VL-8B against `base_url`, run by this interpreter after
    `prelude` (Python run first in the same process, e.g. :data:`CTRL_C_AFTER_FIRST_APPEND`)."""
    return [sys.executable, "-c", f"{prelude}\nfrom mmbu.cli import main; main()", "eval", "run",
            "--release", str(release), "--model", "Qwen3-VL-8B", "--base-url", base_url, "--out", str(runs), *extra]


def wait_for_records(predictions: Path, count: int, timeout_s: float = 60.0) -> None:
    """Return once `predictions` holds at least `count` lines (or the timeout passes: the caller asserts)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predictions.exists() and predictions.read_bytes().count(b"\n") >= count:
            return
        time.sleep(0.02)
