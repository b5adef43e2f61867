"""Dataset manifests: one YAML file per dataset under `manifests/datasets/<id>.yaml`.

Public names: `DatasetManifest`, `load_manifest`, `ManifestError`, `TASKS`, `METADATA_FIELDS`,
`METADATA_FACETS` (field -> taxonomy facet), and the
checks beyond structure: `validate_files`, `check_manifest`, `find_manifest_files`, `ManifestProblem`,
`ValidationReport`, `spdx_problem`.
"""
from mmbu.curation.manifest.model import (
    METADATA_FACETS,
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
from mmbu.curation.manifest.licences import spdx_problem
from mmbu.curation.manifest.source import Source
from mmbu.curation.manifest.validate import (
    ManifestProblem,
    ValidationReport,
    check_manifest,
    find_manifest_files,
    validate_files,
)

__all__ = [
    "METADATA_FACETS", "METADATA_FIELDS", "TASKS", "ConvertSpec", "CurationHistory", "DatasetManifest", "DatasetMetadata",
    "LabelSpec", "ManifestError", "ManifestProblem", "QuestionHints", "Source", "ValidationReport", "check_manifest",
    "find_manifest_files", "load_manifest", "spdx_problem", "validate_files",
]
