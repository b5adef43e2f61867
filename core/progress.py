"""Progress that works everywhere: a live bar on a terminal, a plain line every few seconds elsewhere.

A rich progress bar written to a file (nohup, SLURM, CI logs) shows nothing until the command ends. When the output
is not a terminal, commands report through `PlainProgress` instead: one self-contained line every
`MMBU_PROGRESS_SECONDS` seconds (default 5) with what is done of the total, ok / errors / retries, the rates and the
time left, e.g.

    eval run Qwen3-VL-8B: 84/1554 (5.4%) · ok 80 · error 4 · skipped 0 · retries 12 · 3.1 req/s · 512 tok/s · ETA 00:07:54

and tables printed to a file are drawn wide enough that no identifier is cut (`output_console`).
"""
from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Mapping
from typing import TextIO

from rich.console import Console

PROGRESS_SECONDS_ENV = "MMBU_PROGRESS_SECONDS"
DEFAULT_PROGRESS_SECONDS = 5.0
# Wide enough for any identifier or error cause in a table cell; rich pads a table only to its own width.
FILE_WIDTH = 1000


def output_console(stderr: bool = True) -> Console:
    """A console for tables and messages: the terminal's width on a terminal, else wide enough to cut nothing."""
    console = Console(stderr=stderr)
    return console if console.is_terminal else Console(stderr=stderr, width=FILE_WIDTH, soft_wrap=True)


def is_live(console: Console) -> bool:
    """Whether a live (redrawn) display can be shown on this console."""
    return console.is_terminal and not console.is_dumb_terminal


def progress_seconds() -> float:
    """Seconds between two plain progress lines (MMBU_PROGRESS_SECONDS; an unreadable value gives the default)."""
    try:
        value = float(os.environ.get(PROGRESS_SECONDS_ENV, DEFAULT_PROGRESS_SECONDS))
    except ValueError:
        return DEFAULT_PROGRESS_SECONDS
    return value if value >= 0 else DEFAULT_PROGRESS_SECONDS


def clock_text(seconds: float | None) -> str:
    """'01:02:03', '2.5 days', or '–' when unknown."""
    if seconds is None:
        return "–"
    return time.strftime("%H:%M:%S", time.gmtime(seconds)) if seconds < 86400 else f"{seconds / 86400:.1f} days"


class PlainProgress:
    """Plain progress lines for output that is not a terminal; `update` is cheap to call after every item.

    `counts` are shown in their order (ok, error, retries ...). Rates count the items `answered` (default `done`)
    since the first update, so items skipped on resume do not inflate them; tokens likewise; the ETA is what is left
    of `total` at that rate.
    """

    def __init__(self, label: str, *, unit: str = "items/s", stream: TextIO | None = None,
                 interval: float | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.label, self.unit = label, unit
        self._stream = stream
        self._interval = progress_seconds() if interval is None else interval
        self.clock = clock
        self._started: float | None = None
        self._start_count = 0
        self._start_tokens = 0
        self._last_line = -float("inf")
        self._state: dict = {}
        self._printed_state: dict | None = None

    def update(self, done: int, total: int | None = None, *, counts: Mapping[str, int] | None = None,
               answered: int | None = None, tokens: int | None = None, note: str | None = None,
               force: bool = False) -> None:
        now = self.clock()
        answered = done if answered is None else answered
        if self._started is None:
            self._started, self._start_count, self._start_tokens = now, answered, tokens or 0
        self._state = {"done": done, "total": total, "counts": dict(counts or {}), "tokens": tokens, "note": note,
                       "answered": answered, "now": now}
        if force or now - self._last_line >= self._interval:
            self._print()

    def close(self) -> None:
        """The last line, when something changed since the previous one."""
        if self._state and self._state != self._printed_state:
            self._print()

    def __enter__(self) -> PlainProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def line(self) -> str:
        state = self._state
        done, total = state["done"], state["total"]
        parts = [f"{done:,}/{total:,} ({100 * done / total:.1f}%)" if total else f"{done:,}"]
        parts += [f"{name} {value:,}" for name, value in state["counts"].items()]
        elapsed = state["now"] - (self._started if self._started is not None else state["now"])
        answered = state["answered"] - self._start_count
        rate = answered / elapsed if answered > 0 and elapsed > 0 else 0.0
        parts.append(f"{rate:.1f} {self.unit}")
        if state["tokens"] is not None:
            tokens = state["tokens"] - self._start_tokens
            parts.append(f"{tokens / elapsed if elapsed > 0 else 0:,.0f} tok/s")
        if total:
            parts.append(f"ETA {clock_text((total - done) / rate if rate > 0 and answered >= 2 else None)}")
        if state["note"]:
            parts.append(state["note"])
        return f"{self.label}: " + " · ".join(parts)

    def _print(self) -> None:
        print(self.line(), file=self._stream or sys.stderr, flush=True)
        self._last_line = self._state["now"]
        self._printed_state = dict(self._state)
