"""What a download or an API answer may cost, whoever sends it: its size, its rate and its time.

The numbers are the toolkit's defaults, stated once: the fetch's host policies (`mmbu.curation.http.HostPolicy`)
start from them, and `mmbu eval run --release hf://...` uses them as they are. `BodyMeter` counts a body as it
arrives and raises `BodyTooLong` or `BodyTooSlow` (each with one clause, `detail`, saying what was seen) the moment
a bound is passed, so an endless or dripping body costs its bound, never the disk or the clock it would take.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

SIZE_MARGIN = 0.01  # a body may exceed its declared size by this fraction ...
SIZE_MARGIN_BYTES = 1024**2  # ... plus this many bytes
MIN_BYTES_PER_SECOND = 4096.0  # averaged over RATE_WINDOW seconds
RATE_WINDOW = 60.0
FILE_DEADLINE = 6 * 3600.0  # one file, resumed attempts included
CALL_DEADLINE = 120.0  # one API call (a JSON answer)
MAX_JSON_BYTES = 64 * 1024**2


def declared_size_bound(declared: int, margin: float = SIZE_MARGIN) -> int:
    """The most bytes a body declared as `declared` bytes may bring: the margin fraction plus SIZE_MARGIN_BYTES."""
    return int(declared * (1 + margin)) + SIZE_MARGIN_BYTES


@dataclass
class BodyLimits:
    """What one body may cost: `max_bytes`, and time (a `deadline` on the monotonic clock, a minimum rate)."""

    max_bytes: int
    deadline: float
    min_bytes_per_second: float
    rate_window: float


class BodyTooLong(Exception):
    def __init__(self, detail: str) -> None:
        self.detail = detail
        super().__init__(detail)


class BodyTooSlow(Exception):
    def __init__(self, detail: str) -> None:
        self.detail = detail
        super().__init__(detail)


class BodyMeter:
    """Counts one body's pieces against `limits`; `count(n)` raises BodyTooLong or BodyTooSlow past a bound."""

    def __init__(self, limits: BodyLimits) -> None:
        self.limits = limits
        self.total = 0
        self._window_start, self._window_bytes = time.monotonic(), 0

    def count(self, n: int) -> None:
        limits = self.limits
        self.total += n
        if self.total > limits.max_bytes:
            raise BodyTooLong(f"the answer is larger than the {limits.max_bytes:,} bytes allowed; it was not kept")
        now = time.monotonic()
        if now > limits.deadline:
            raise BodyTooSlow(f"still arriving after its deadline ({self.total:,} bytes so far)")
        self._window_bytes += n
        elapsed = now - self._window_start
        if elapsed >= limits.rate_window:
            if limits.min_bytes_per_second and self._window_bytes / elapsed < limits.min_bytes_per_second:
                raise BodyTooSlow(f"arriving at {self._window_bytes / elapsed:,.0f} bytes/s, below the "
                                  f"{limits.min_bytes_per_second:,.0f} bytes/s minimum")
            self._window_start, self._window_bytes = now, 0
