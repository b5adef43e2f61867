"""The agent's tunables, read from `curation/data/discovery.yaml` (data, not code)."""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field

from mmbu.curation.data import DISCOVERY_PATH


class ImagingEvidence(BaseModel):
    model_config = ConfigDict(extra="forbid")

    words: list[str]
    tags: list[str]
    file_extensions: list[str]
    negative_tags: list[str]


class DiscoverySettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: int = 1
    task_words: list[str] = Field(min_length=1)
    specimens: list[str] = Field(default_factory=list)
    widen_below: int = Field(3, ge=0)
    max_pages_per_query: int = Field(3, ge=1)
    imaging_evidence: ImagingEvidence
    machine_label_markers: list[str]
    score_weights: dict[str, float]
    exclude_flags: list[str] = Field(
        default_factory=lambda: ["contaminated", "not-imaging", "machine-labels", "unresolved-lead"],
        description="Flags that mark a candidate excluded; the other flags only draw a reviewer's eye.",
    )


@lru_cache(maxsize=4)
def load_settings(path: Path = DISCOVERY_PATH) -> DiscoverySettings:
    return DiscoverySettings.model_validate(yaml.safe_load(path.read_text(encoding="utf-8")))
