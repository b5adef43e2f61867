"""Module-level work functions for executor tests (worker processes import them by name)."""
from __future__ import annotations

import gc
import os
import signal
import time
from pathlib import Path


def die_or_echo(item: str) -> str:
    """Kill the worker process outright (as the OOM killer would) for items starting with 'die', else echo."""
    if item.startswith("die"):
        signal.raise_signal(signal.SIGKILL)
    return item.upper()


def record_pid_and_sleep(folder: str) -> None:
    """Write this worker's pid into `folder`, then work for a long time."""
    (Path(folder) / f"{os.getpid()}.pid").write_text("")
    time.sleep(120)


def garbage_collector_state(_: object) -> tuple[tuple[int, int, int], int]:
    """This worker's collection thresholds and how many objects it has frozen."""
    return gc.get_threshold(), gc.get_freeze_count()
