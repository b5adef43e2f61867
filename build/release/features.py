"""Moved to `mmbu.core.release`: the release contract as one typed table for the writer and the eval reader."""
from __future__ import annotations

from mmbu.core.release import CONTRACT_COLUMNS, EXTRA_COLUMNS, RELEASE_COLUMNS, SPLIT, release_features  # noqa: F401  # re-export for work in flight
from mmbu.core.release import TASKS as CONFIGS  # noqa: F401  # re-export for work in flight
