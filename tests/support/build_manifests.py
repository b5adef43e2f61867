"""Factories for the build-library tests: a small taxonomy and manifests around a given layout.

The taxonomy is written to disk and loaded with the real loader, so tests do not depend on how far
the bundled `taxonomy.yaml` has grown.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from mmbu.curation.manifest import DatasetManifest
from mmbu.taxonomy.model import Taxonomy, load_taxonomy

TAXONOMY = {
    "schema_version": 1,
    "facets": {
        "domain": {"description": "Medical domain.", "terms": [
            {"id": "hematology", "name": "Hematology", "synonyms": ["haematology"]},
            {"id": "radiology", "name": "Radiology"},
            {"id": "pathology", "name": "Pathology"},
        ]},
        "modality": {"description": "Imaging modality.", "terms": [
            {"id": "light_microscopy", "name": "light microscopy", "synonyms": ["optical microscopy"]},
            {"id": "computed_tomography", "name": "computed tomography", "abbreviations": ["CT"]},
            {"id": "digital_pathology", "name": "digital pathology"},
        ]},
        "sub_modality": {"description": "Sub-modality.", "parent_facet": "modality", "terms": [
            {"id": "brightfield_microscopy", "name": "brightfield microscopy", "parent": "light_microscopy",
             "synonyms": ["bright-field microscopy"]},
            {"id": "phase_contrast_microscopy", "name": "phase contrast microscopy", "parent": "light_microscopy"},
            {"id": "conventional_ct", "name": "conventional computed tomography", "parent": "computed_tomography",
             "synonyms": ["conventional CT"]},
            {"id": "whole_slide_imaging", "name": "whole-slide imaging", "parent": "digital_pathology",
             "abbreviations": ["WSI"]},
        ]},
        "stain": {"description": "Stain.", "terms": [
            {"id": "mgg", "name": "May-Grünwald-Giemsa", "synonyms": ["Pappenheim"], "abbreviations": ["MGG"]},
            {"id": "he", "name": "hematoxylin and eosin", "abbreviations": ["H&E", "HE"]},
        ]},
        "specimen": {"description": "Specimen.", "terms": [
            {"id": "human", "name": "human", "synonyms": ["homo sapiens"]},
            {"id": "mouse", "name": "mouse"},
        ]},
        "anatomy": {"description": "Body part.", "terms": [
            {"id": "bone_marrow", "name": "bone marrow"},
            {"id": "chest", "name": "chest", "synonyms": ["thorax"]},
            {"id": "breast", "name": "breast"},
        ]},
        "cell_type": {"description": "Label terms.", "terms": [
            {"id": "monocyte", "name": "monocyte", "synonyms": ["monocytes"]},
            {"id": "erythroblast", "name": "erythroblast", "synonyms": ["normoblast"], "abbreviations": ["EBL"]},
        ]},
    },
}

METADATA = {
    "image_source": "Zenodo",
    "dataset_name": "Demo bone marrow smears",
    "domain": "Hematology",
    "modality": "light microscopy",
    "sub_modality": "brightfield microscopy",
    "stain": "May-Grünwald-Giemsa",
    "specimen": "human",
    "specimen_subregion": "bone marrow",
    "topic": "cell morphology",
    "original_task": "classification",
    "context": "bone marrow smear cytology",
    "institution": "Demo University Hospital",
    "url": "https://zenodo.org/records/123",
}

LABELS = {
    "MON": {"name": "monocyte", "synonyms": ["mono"]},
    "PMY": "promyelocyte",
    "EBO": "proerythroblast",
    "BNE": "band neutrophil",
    "LYT": "lymphocyte",
    "EOS": "eosinophil",
}


def write_taxonomy(directory: Path) -> Taxonomy:
    path = directory / "taxonomy.yaml"
    path.write_text(yaml.safe_dump(TAXONOMY, allow_unicode=True), encoding="utf-8")
    return load_taxonomy(path)


def make_manifest(layout: dict[str, Any], *, dataset_id: str = "demo_marrow", labels: dict | None = None,
                  tasks: list[str] | None = None, metadata: dict | None = None,
                  questions: dict | None = None, license: str = "CC-BY-4.0", convert: dict | None = None
                  ) -> DatasetManifest:
    document = {
        "id": dataset_id,
        "title": "Demo dataset",
        "source": {"kind": "local", "path": "demo"},
        "license": license,
        "citation": "Doe J. Demo data. 2024.",
        "tasks": tasks or ["ungrounded_classification"],
        "layout": layout,
        "metadata": {**METADATA, **(metadata or {})},
        "labels": LABELS if labels is None else labels,
        "questions": {"options_name": "myeloid lineage cell type", "preparation": "smear", **(questions or {})},
        "curation": {"round": 3, "reviewers": ["a", "b"]},
    }
    if convert:
        document["convert"] = convert
    return DatasetManifest.model_validate(document)


def write_png(path: Path, size: tuple[int, int] = (32, 24), value: int = 128, mode: str = "RGB") -> Path:
    """A small real PNG (width, height) with a gradient so it is not constant."""
    import numpy as np
    from PIL import Image

    width, height = size
    ramp = (np.add.outer(np.arange(height), np.arange(width)) + value) % 256
    array = np.stack([ramp] * 3, axis=-1) if mode == "RGB" else ramp
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(array.astype("uint8"), mode=mode).save(path)
    return path


def write_dicom(path: Path, rows: int = 20, columns: int = 30, **tags: Any) -> Path:
    """A small uncompressed 12-bit DICOM file with the given header tags."""
    import numpy as np
    from pydicom.dataset import Dataset, FileMetaDataset
    from pydicom.uid import ExplicitVRLittleEndian, generate_uid

    meta = FileMetaDataset()
    meta.MediaStorageSOPClassUID = "1.2.840.10008.5.1.4.1.1.2"
    meta.MediaStorageSOPInstanceUID = generate_uid()
    meta.TransferSyntaxUID = ExplicitVRLittleEndian
    ds = Dataset()
    ds.file_meta = meta
    ds.SOPClassUID = meta.MediaStorageSOPClassUID
    ds.SOPInstanceUID = meta.MediaStorageSOPInstanceUID
    ds.Rows, ds.Columns = rows, columns
    ds.BitsAllocated, ds.BitsStored, ds.HighBit, ds.PixelRepresentation = 16, 12, 11, 0
    ds.SamplesPerPixel, ds.PhotometricInterpretation = 1, "MONOCHROME2"
    ds.PixelData = np.arange(rows * columns, dtype=np.uint16).tobytes()
    for key, value in tags.items():
        setattr(ds, key, value)
    path.parent.mkdir(parents=True, exist_ok=True)
    ds.save_as(path, enforce_file_format=True)
    return path


def write_aperio_slide(path: Path) -> Path:
    """A tiled TIFF whose description makes openslide read it as an Aperio slide."""
    import numpy as np
    import tifffile

    pixels = np.full((512, 640, 3), 200, np.uint8)
    description = ("Aperio Image Library v12.0.0\n640x512 [0,0 640x512] (256x256) RAW/RGB"
                   "|AppMag = 20|MPP = 0.4990")
    path.parent.mkdir(parents=True, exist_ok=True)
    tifffile.imwrite(path, pixels, tile=(256, 256), photometric="rgb", description=description, metadata=None)
    return path
