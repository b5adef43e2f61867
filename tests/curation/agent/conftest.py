"""Fixtures for the agent tests: the replayed APIs and fast polite session of tests/curation/sources."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location("discovery_source_fixtures", Path(__file__).parents[1] / "sources" / "conftest.py")
_sources = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_sources)

replay = _sources.replay
apis = _sources.apis
session = _sources.session


@pytest.fixture
def replay_module():
    """The replay module itself (to re-install a route mid-test)."""
    return replay


@pytest.fixture
def taxonomy_path() -> Path:
    return Path(__file__).parent / "data" / "taxonomy.yaml"
