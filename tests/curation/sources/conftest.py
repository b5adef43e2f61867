"""Fixtures for the discovery-source tests: the replayed APIs and a polite session fast enough for tests."""
from __future__ import annotations

import importlib.util
import time
from pathlib import Path

import pytest

from mmbu.curation.http import HostPolicy, PoliteSession

_spec = importlib.util.spec_from_file_location("discovery_replay", Path(__file__).with_name("replay.py"))
replay = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(replay)

# Loopback hosts get no built-in policy; this one keeps the real retry logic but does not crawl.
FAST = HostPolicy(requests_per_second=200, burst=5, backoff_base=0.05, backoff_max=0.2, max_attempts=3)


@pytest.fixture
def apis(loopback, monkeypatch):
    """The loopback server replaying Zenodo, the Hub, Kaggle; the env points every client at it."""
    replay.install_all(loopback, monkeypatch)
    return loopback


@pytest.fixture
def session(tmp_path):
    sleeps: list[float] = []

    def sleep(seconds: float) -> None:  # record the waits the policy asks for (the host pause is real)
        sleeps.append(seconds)
        time.sleep(seconds)

    polite = PoliteSession({}, cache_dir=tmp_path / "cache", default_policy=FAST, sleep=sleep)
    polite.sleeps = sleeps
    yield polite
    polite.close()
