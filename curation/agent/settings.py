"""The agent's tunables, read from `curation/data/discovery.yaml` (data, not code)."""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from mmbu.curation.data import DISCOVERY_PATH, load_yaml_model
from mmbu.curation.sources.zenodo import resource_type_id


class ImagingEvidence(BaseModel):
    model_config = ConfigDict(extra="forbid")

    words: list[str]
    tags: list[str]
    file_extensions: list[str]
    negative_tags: list[str]


class ZenodoPass(BaseModel):
    """One search per query and pass: Zenodo's `type` (and optional `subtype`) filter on the resource type."""

    model_config = ConfigDict(extra="forbid")

    type: str = Field(pattern=r"^[a-z]+$")
    subtype: str | None = Field(None, pattern=r"^[a-z]+$")
    max_pages: int | None = Field(None, ge=1, description="Pages per query for this pass (default: max_pages_per_query).")

    @property
    def resource_type(self) -> str:
        """What the pass finds, as Zenodo ids it: `image`, or `image-photo` with a subtype."""
        return resource_type_id(self.type, self.subtype) or self.type

    @property
    def params(self) -> dict[str, str]:
        """The request parameters of the pass (`subtype` only when set: the server ignores it without `type`)."""
        return {"type": self.type, **({"subtype": self.subtype} if self.subtype else {})}


class ImageRecordScreen(BaseModel):
    """When a record of an image resource type holds enough image files to be a dataset rather than a figure."""

    model_config = ConfigDict(extra="forbid")

    resource_types: list[str] = Field(min_length=1)
    min_image_files: int = Field(ge=1)
    image_extensions: list[str] = Field(min_length=1)
    bundle_extensions: list[str]
    min_bundle_bytes: int = Field(0, ge=0)
    count_nouns: list[str] = Field(min_length=1)


class ZenodoSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    passes: list[ZenodoPass] = Field(min_length=1)
    image_records: ImageRecordScreen


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
    zenodo: ZenodoSettings
    exclude_flags: list[str] = Field(
        default_factory=lambda: ["contaminated", "not-imaging", "machine-labels", "unresolved-lead", "too-few-images"],
        description="Flags that mark a candidate excluded; the other flags only draw a reviewer's eye.",
    )


class SettingsError(ValueError):
    """The discovery settings file is not valid (the message names the file and the field)."""


@lru_cache(maxsize=4)
def load_settings(path: Path = DISCOVERY_PATH) -> DiscoverySettings:
    return load_yaml_model(path, DiscoverySettings, SettingsError, "discovery settings")
