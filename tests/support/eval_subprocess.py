"""`mmbu eval run` in a child process, for the tests that kill or interrupt it mid-run."""
from __future__ import annotations

import sys
import time
from pathlib import Path


def eval_run_command(release: Path, base_url: str, runs: Path, *extra: str) -> list[str]:
    """The command line of `mmbu eval run` for Qwen3-VL-8B against `base_url`, run by this interpreter."""
    return [sys.executable, "-c", "from mmbu.cli import main; main()", "eval", "run", "--release", str(release),
            "--model", "Qwen3-VL-8B", "--base-url", base_url, "--out", str(runs), *extra]


def wait_for_records(predictions: Path, count: int, timeout_s: float = 60.0) -> None:
    """Return once `predictions` holds at least `count` lines (or the timeout passes: the caller asserts)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predictions.exists() and predictions.read_bytes().count(b"\n") >= count:
            return
        time.sleep(0.02)
