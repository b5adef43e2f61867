"""The installed toolkit version: in User-Agents, provenance records and build cache keys."""
from __future__ import annotations

from functools import cache

UNKNOWN_VERSION = "0+unknown"  # a source tree that was never installed


@cache
def toolkit_version() -> str:
    """The installed `mmbu` version, looked up once per process (importlib.metadata costs ~35 ms)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("mmbu")
    except PackageNotFoundError:
        return UNKNOWN_VERSION
