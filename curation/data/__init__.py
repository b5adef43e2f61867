"""Curation data tables (contamination exclusion list, review rules, discovery settings, the composition policy) kept
as YAML.

The licence maps are the toolkit's, in `core/licences.yaml` (`mmbu.core.licences`).
"""
from __future__ import annotations

from pathlib import Path
from typing import TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from mmbu.core.yaml_io import read_yaml

M = TypeVar("M", bound=BaseModel)

DATA_DIR = Path(__file__).parent
CONTAMINATION_PATH = DATA_DIR / "contamination.yaml"
REVIEW_RULES_PATH = DATA_DIR / "review_rules.yaml"
COMPOSITION_PATH = DATA_DIR / "composition.yaml"
DISCOVERY_PATH = DATA_DIR / "discovery.yaml"


def load_yaml_model(path: Path, model: type[M], error: type[Exception], what: str) -> M:
    """Read a YAML data file into a pydantic model; any failure is `error` with one sentence naming file and field."""
    try:
        return model.model_validate(read_yaml(path))
    except (OSError, yaml.YAMLError) as exc:
        raise error(f"{path}: cannot read the {what} ({exc})") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(map(str, first["loc"])) or "(top level)"
        raise error(f"{path}: field {where}: {first['msg']}") from None
