"""A small repository for whole-build tests: a folder-per-class dataset and an image/mask dataset written by
Pillow, with local sources, plus optional broken datasets (a label outside the vocabulary, a missing source)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import yaml
from PIL import Image

from mmbu.build.pipeline import BuildConfig

CURATION = {"round": 3, "reviewers": ["tester"]}
BLOOD = {
    "image_source": "synthetic test images", "dataset_name": "synthetic blood cells", "domain": "hematology",
    "modality": "light microscopy", "sub_modality": "brightfield microscopy", "stain": "Giemsa",
    "specimen": "human", "topic": "blood cells", "original_task": "cell classification",
    "url": "https://example.org/blood",
}
NUCLEI = BLOOD | {"dataset_name": "synthetic nuclei", "domain": "cell biology", "modality": "fluorescence microscopy",
                  "sub_modality": "epifluorescence microscopy", "stain": None, "specimen": "cell culture",
                  "topic": "nuclei", "original_task": "nucleus segmentation", "url": "https://example.org/nuclei"}
CELL_CLASSES = {"lym": "lymphocyte", "neu": "neutrophil", "mon": "monocyte", "eos": "eosinophil"}


def write_manifest(folder: Path, dataset_id: str, **fields) -> Path:
    document = {"id": dataset_id, "title": dataset_id, "license": "CC-BY-4.0", "citation": "test data",
                "curation": CURATION, **fields}
    path = folder / f"{dataset_id}.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    return path


def write_nuclei_manifest(manifests: Path) -> Path:
    """The manifest of `src/nuclei/`: image/mask pairs, mask value 1 a nucleus and 2 a mitotic figure, components."""
    return write_manifest(manifests, "nuclei", source={"kind": "local", "path": "src/nuclei"},
                          tasks=["box_grounded_classification", "mask_grounded_classification", "object_detection"],
                          layout={"kind": "image_mask_pairs", "images": "images/*.png", "masks": "masks/*.png",
                                  "mask_values": {1: "nuc", 2: "mit"}, "instances": "components"},
                          metadata=NUCLEI, labels={"nuc": "interphase nucleus", "mit": "mitotic figure"},
                          questions={"options_name": "nuclear appearance", "target_name": "nucleus", "n_options": 3})


def make_repo(root: Path, *, broken: bool = False) -> Path:
    """A repository with a folder-per-class dataset and an image/mask dataset (and optionally bad ones)."""
    manifests = root / "manifests" / "datasets"
    manifests.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for raw, _ in CELL_CLASSES.items():
        folder = root / "src" / "cells" / raw
        folder.mkdir(parents=True)
        for index in range(2):
            pixels = rng.integers(0, 255, (40, 48, 3), dtype=np.uint8)
            Image.fromarray(pixels).save(folder / f"{raw}{index}.png")
    write_manifest(manifests, "cells", source={"kind": "local", "path": "src/cells"},
                   tasks=["ungrounded_classification"], layout={"kind": "folder_per_class"}, metadata=BLOOD,
                   labels=CELL_CLASSES, questions={"options_name": "blood cell type", "n_options": 5})

    (root / "src" / "nuclei" / "images").mkdir(parents=True)
    (root / "src" / "nuclei" / "masks").mkdir(parents=True)
    for index in range(2):
        image = np.full((64, 80), 20, dtype=np.uint8)
        mask = np.zeros((64, 80), dtype=np.uint8)
        mask[10 + 40 * index:20 + 40 * index, 10:24] = 1  # a nucleus (elsewhere in each field: two distinct images)
        mask[30 + index:44 + index, 40:60] = 2  # a mitotic figure
        image[mask > 0] = 200
        Image.fromarray(image).save(root / "src" / "nuclei" / "images" / f"field{index}.png")
        Image.fromarray(mask).save(root / "src" / "nuclei" / "masks" / f"field{index}.png")
    write_nuclei_manifest(manifests)
    if broken:
        # a layout that finds a label outside the vocabulary, and a source that does not exist
        stray = root / "src" / "stray" / "unknown"
        stray.mkdir(parents=True)
        Image.fromarray(np.zeros((8, 8), np.uint8)).save(stray / "x.png")
        (root / "src" / "stray" / "lym").mkdir()
        Image.fromarray(np.zeros((8, 8), np.uint8)).save(root / "src" / "stray" / "lym" / "y.png")
        write_manifest(manifests, "stray", source={"kind": "local", "path": "src/stray"},
                       tasks=["ungrounded_classification"], layout={"kind": "folder_per_class"}, metadata=BLOOD,
                       labels=CELL_CLASSES, questions={"options_name": "blood cell type", "n_options": 5})
        write_manifest(manifests, "missing", source={"kind": "local", "path": "src/nowhere"},
                       tasks=["ungrounded_classification"], layout={"kind": "folder_per_class"}, metadata=BLOOD,
                       labels=CELL_CLASSES, questions={"options_name": "blood cell type", "n_options": 5})
    return manifests


def config_for(root: Path, **overrides) -> BuildConfig:
    return BuildConfig(**{"manifests_dir": root / "manifests" / "datasets", "data_dir": root / "data",
                          "repo_root": root, **overrides})


def built_release(root: Path) -> tuple[str, str]:
    """Build the repository at `root` (every dataset must build) and return the release folder and a `datasets`
    cache folder for loading it."""
    from mmbu.build.pipeline import run_build

    report = run_build(config_for(root))
    assert report.exit_code == 0, report.failed
    return str(root / "data" / "release"), str(root / "hf")


def write_rows_step_datasets(root: Path, manifests: Path, rng: np.random.Generator) -> None:
    """Two datasets whose rows step drops items at its later stages: image/mask pairs, two nuclei each, for three
    tasks (ROI PNGs), one mask of the wrong size; a folder per class whose questions the wording lint rejects."""
    folder = root / "src" / "pairs"
    (folder / "images").mkdir(parents=True, exist_ok=True)
    (folder / "masks").mkdir(parents=True, exist_ok=True)
    for index in range(7):
        Image.fromarray(rng.integers(0, 255, (48, 64), dtype=np.uint8)).save(folder / "images" / f"f{index}.png")
        mask = np.zeros((48, 64) if index != 3 else (20, 20), np.uint8)
        mask[4:12, 4:12], mask[30:40, 40:52] = 1, 2
        Image.fromarray(mask).save(folder / "masks" / f"f{index}.png")
    write_manifest(manifests, "pairs", source={"kind": "local", "path": "src/pairs"},
                   tasks=["box_grounded_classification", "mask_grounded_classification", "object_detection"],
                   metadata=NUCLEI, labels={"nuc": "interphase nucleus", "mit": "mitotic figure"},
                   layout={"kind": "image_mask_pairs", "images": "images/*.png", "masks": "masks/*.png",
                           "mask_values": {1: "nuc", 2: "mit"}, "instances": "components"},
                   questions={"options_name": "nuclear appearance", "target_name": "nucleus", "n_options": 3})
    for raw in ("lym", "neu", "mon"):
        for copy in range(2):
            path = root / "src" / "lint" / raw / f"x{copy}.png"
            path.parent.mkdir(parents=True, exist_ok=True)
            Image.fromarray(rng.integers(0, 255, (24, 32), dtype=np.uint8)).save(path)
    write_manifest(manifests, "lint", source={"kind": "local", "path": "src/lint"},
                   tasks=["ungrounded_classification"], layout={"kind": "folder_per_class"}, metadata=BLOOD,
                   labels={"lym": "lymphocyte", "neu": "neutrophil", "mon": "monocyte"},
                   questions={"options_name": "tumour cell type", "n_options": 3})
