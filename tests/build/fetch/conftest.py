"""Fixtures for fetch tests: manifests on disk, a fast polite session, and host replicas on the loopback server."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from mmbu.build.fetch import LockFile
from mmbu.curation.http import HostPolicy, PoliteSession
from mmbu.curation.manifest import DatasetManifest, load_manifest

FAST = HostPolicy(requests_per_second=1000, burst=100, backoff_base=0.01, backoff_max=0.02,
                  connect_timeout=2, read_timeout=2, max_attempts=3, max_server_wait=5)


def manifest_document(dataset_id: str, source: dict[str, Any], licence: str = "CC-BY-4.0") -> dict[str, Any]:
    return {
        "id": dataset_id,
        "title": f"Test dataset {dataset_id}",
        "source": source,
        "license": licence,
        "citation": "Doe J. Test data. 2024.",
        "tasks": ["ungrounded_classification"],
        "layout": {"kind": "folder_per_class", "root": "."},
        "metadata": {
            "image_source": "Zenodo", "dataset_name": dataset_id, "domain": "Hematology",
            "modality": "light microscopy", "sub_modality": "brightfield microscopy", "specimen": "human",
            "topic": "cell morphology", "original_task": "classification", "url": "https://example.org",
        },
        "labels": {"a": "monocyte", "b": "lymphocyte"},
        "questions": {"options_name": "cell type"},
        "curation": {"round": 3, "reviewers": ["r1", "r2"]},
    }


@pytest.fixture
def manifests_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "repo" / "manifests" / "datasets"
    folder.mkdir(parents=True)
    return folder


@pytest.fixture
def write_manifest(manifests_dir: Path):
    """write_manifest(id, source, licence=...) -> DatasetManifest (also written to manifests_dir/<id>.yaml)."""

    def write(dataset_id: str, source: dict[str, Any], licence: str = "CC-BY-4.0") -> DatasetManifest:
        path = manifests_dir / f"{dataset_id}.yaml"
        path.write_text(yaml.safe_dump(manifest_document(dataset_id, source, licence)), encoding="utf-8")
        return load_manifest(path)

    return write


@pytest.fixture
def session() -> PoliteSession:
    with PoliteSession({}, default_policy=FAST) as client:
        yield client


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def lock(manifests_dir: Path) -> LockFile:
    return LockFile(manifests_dir.parent / "manifests.lock")
