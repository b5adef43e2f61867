"""Seconds to wait from an HTTP `Retry-After` header (RFC 9110 §10.2.3), for every client that retries."""
from __future__ import annotations

import time
from email.utils import parsedate_to_datetime


def retry_after_seconds(value: str | None, now: float | None = None) -> float | None:
    """Delta-seconds or an HTTP date as seconds from `now` (never negative); None if absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))
