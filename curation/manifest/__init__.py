"""Dataset manifests: one YAML file per dataset under `manifests/datasets/<id>.yaml`.

Public names: `DatasetManifest`, `load_manifest`, `ManifestError`, `TASKS`, `METADATA_FIELDS`.
"""
from mmbu.curation.manifest.model import (
    METADATA_FIELDS,
    TASKS,
    ConvertSpec,
    CurationHistory,
    DatasetManifest,
    DatasetMetadata,
    LabelSpec,
    ManifestError,
    QuestionHints,
    load_manifest,
)
from mmbu.curation.manifest.source import Source

__all__ = [
    "METADATA_FIELDS", "TASKS", "ConvertSpec", "CurationHistory", "DatasetManifest", "DatasetMetadata",
    "LabelSpec", "ManifestError", "QuestionHints", "Source", "load_manifest",
]
