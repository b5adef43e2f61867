"""Curation data tables (contamination exclusion list, licence maps, review rules) kept as YAML."""
from __future__ import annotations

from pathlib import Path

DATA_DIR = Path(__file__).parent
CONTAMINATION_PATH = DATA_DIR / "contamination.yaml"
LICENSES_PATH = DATA_DIR / "licenses.yaml"
REVIEW_RULES_PATH = DATA_DIR / "review_rules.yaml"
DISCOVERY_PATH = DATA_DIR / "discovery.yaml"
