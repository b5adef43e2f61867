"""`mmbu build` prints each dataset's evidence level (the weakest of host, licence and layout), and builds a
manifest without evidence (test and local manifests) while `mmbu manifests validate` rejects it."""
from __future__ import annotations

import json
import re

import numpy as np
import yaml
from click.testing import CliRunner
from PIL import Image

from mmbu.cli import cli

METADATA = {"image_source": "written by the test", "dataset_name": "cells", "domain": "hematology",
            "modality": "light microscopy", "sub_modality": "brightfield microscopy", "specimen": "blood smear",
            "topic": "blood cells", "original_task": "cell classification", "url": "https://a.example.org/cells"}
EVIDENCE = {
    "host": {"source": "https://a.example.org/cells", "level": "primary"},
    "licence": {"source": "https://a.example.org/cells/LICENSE", "level": "primary"},
    "layout": {"source": "someorg/loaders@0123abc:cells.py", "level": "secondary"},
    "labels": {"provenance": "experts", "cites": {"source": "https://a.example.org/paper", "level": "primary"}},
    "samples": {"count": 4, "cites": {"source": "https://a.example.org/cells", "level": "primary"}},
}


def write_dataset(root, dataset_id, evidence):
    for label in ("lym", "neu"):
        folder = root / "src" / dataset_id / label
        folder.mkdir(parents=True)
        for index in range(2):
            seed = [index, *map(ord, dataset_id + label)]  # distinct images: copies would be dropped as duplicates
            pixels = np.random.default_rng(seed).integers(0, 255, (24, 32, 3), dtype=np.uint8)
            Image.fromarray(pixels).save(folder / f"{label}{index}.png")
    document = {"id": dataset_id, "title": dataset_id, "source": {"kind": "local", "path": f"src/{dataset_id}"},
                "license": "CC-BY-4.0", "citation": "test data", "tasks": ["ungrounded_classification"],
                "layout": {"kind": "folder_per_class"}, "metadata": METADATA,
                "labels": {"lym": "lymphocyte", "neu": "neutrophil"},
                "questions": {"options_name": "blood cell type", "n_options": 3},
                "curation": {"round": 1, "reviewers": ["tester"]}}
    if evidence:
        document["evidence"] = evidence
    manifests = root / "manifests" / "datasets"
    manifests.mkdir(parents=True, exist_ok=True)
    (manifests / f"{dataset_id}.yaml").write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")


def test_build_prints_the_evidence_level_and_validate_requires_evidence(tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text("")  # marks the repository root local sources are relative to
    write_dataset(tmp_path, "with_evidence", EVIDENCE)
    write_dataset(tmp_path, "without_evidence", None)
    monkeypatch.chdir(tmp_path)
    runner = CliRunner(env={"COLUMNS": "200"})

    built = runner.invoke(cli, ["build", "--manifests", "manifests/datasets", "--data", "data"],
                          catch_exceptions=False)
    assert built.exit_code == 0, built.output
    rows = {line.split("│")[1].strip(): line.split("│")[2].strip() for line in built.output.splitlines()
            if line.startswith("│") and "evidence" in line.split("│")[1]}
    assert rows == {"with_evidence": "secondary", "without_evidence": "none"}
    assert re.search(r"rows per task: ungrounded_classification \d+;", built.output), built.output
    report = json.loads((tmp_path / "data" / "build-report.json").read_text())
    assert {d["dataset_id"]: d["evidence"] for d in report["datasets"]} == rows

    checked = runner.invoke(cli, ["manifests", "validate", "manifests/datasets"])
    assert checked.exit_code == 1
    assert "without_evidence.yaml: evidence: missing" in checked.output
    assert "with_evidence.yaml" not in checked.output.replace("without_evidence.yaml", "")
