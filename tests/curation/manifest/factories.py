"""Small factories for manifest files written with the real YAML writer (imported by the tests here)."""
from __future__ import annotations

import copy
from pathlib import Path

import yaml

BASE_MANIFEST = {
    "id": "blood_cells",
    "title": "Peripheral blood cell images",
    "source": {"kind": "zenodo", "record": 3835},
    "license": "CC-BY-4.0",
    "citation": "Example et al. (2020). A dataset of blood cells.",
    "tasks": ["ungrounded_classification"],
    "layout": {"kind": "folder_per_class", "root": "images"},
    "metadata": {
        "image_source": "Hospital Clinic of Barcelona",
        "dataset_name": "Peripheral blood cells",
        "domain": "hematology",
        "modality": "light microscopy",
        "sub_modality": "brightfield microscopy",
        "stain": "May-Grünwald-Giemsa",
        "specimen": "blood smear",
        "specimen_subregion": "blood",
        "topic": "blood cell morphology",
        "original_task": "blood cell type classification",
        "url": "https://example.org/blood",
    },
    "labels": {"neutrophil": "neutrophil", "lymphocyte": "lymphocyte", "monocyte": "monocyte",
               "eosinophil": "eosinophil", "basophil": {"name": "basophil", "synonyms": ["basophilic granulocyte"]}},
    "questions": {"options_name": "blood cell type", "n_options": 5},
    "curation": {"round": 3, "reviewers": ["reviewer-a", "reviewer-b"]},
    "evidence": {
        "host": {"source": "https://zenodo.org/records/3835", "level": "primary"},
        "licence": [{"source": "https://zenodo.org/records/3835", "level": "primary",
                     "quote": "Creative Commons Attribution 4.0 International"}],
        "layout": {"source": "someorg/loaders@0123abc:datasets/blood.py", "level": "secondary",
                   "quote": "images/<class>/*.jpg"},
        "labels": {"provenance": "experts", "cites": {"source": "https://doi.org/10.1016/j.dib.2020.105474",
                                                      "level": "primary"}},
        "samples": {"count": 17092, "cites": {"source": "https://zenodo.org/records/3835", "level": "primary"}},
    },
}


def manifest_dict(**changes) -> dict:
    """A valid manifest as a dict; keyword arguments replace top-level fields (`metadata__x` one metadata field)."""
    document = copy.deepcopy(BASE_MANIFEST)
    for key, value in changes.items():
        if "__" in key:
            outer, inner = key.split("__", 1)
            document[outer][inner] = value
        else:
            document[key] = value
    return document


def write_manifest(folder: Path, document: dict, stem: str | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{stem or document.get('id', 'manifest')}.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return path
