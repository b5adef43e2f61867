"""Samples that are not files (array items, assembled masks) go through convert and release like any other:
the released image and mask equal the source pixels, a rebuild is a no-op, a lost cache file is made again."""
from __future__ import annotations

import numpy as np
import yaml
from PIL import Image

from mmbu.build.pipeline import BuildConfig, run_build

TISSUE = {
    "image_source": "synthetic test images", "dataset_name": "synthetic nuclei", "domain": "pathology",
    "modality": "light microscopy", "sub_modality": "brightfield microscopy", "stain": "hematoxylin and eosin",
    "specimen": "human", "topic": "nuclei", "original_task": "nucleus segmentation", "url": "https://example.org/n",
}
TASKS = ["mask_grounded_classification", "box_grounded_classification", "object_detection"]


def make_repo(root):
    manifests = root / "manifests" / "datasets"
    manifests.mkdir(parents=True)
    fold = root / "src" / "pannuke" / "Fold 1"
    (fold / "images" / "fold1").mkdir(parents=True)
    (fold / "masks" / "fold1").mkdir(parents=True)
    images = np.random.default_rng(5).integers(0, 256, (2, 40, 48, 3)).astype(np.float64)
    masks = np.zeros((2, 40, 48, 3))
    masks[:, 4:12, 6:16, 0] = 3       # a neoplastic nucleus in each image
    masks[:, 20:30, 25:40, 1] = 9     # an inflammatory cell
    masks[..., 2] = masks[..., :2].sum(-1) == 0
    np.save(fold / "images" / "fold1" / "images.npy", images)
    np.save(fold / "masks" / "fold1" / "masks.npy", masks)
    document = {
        "id": "nuclei_arrays", "title": "nuclei arrays", "license": "CC-BY-4.0", "citation": "test data",
        "curation": {"round": 3, "reviewers": ["tester"]}, "source": {"kind": "local", "path": "src/pannuke"},
        "tasks": TASKS, "metadata": TISSUE,
        "layout": {"kind": "arrays", "images": "Fold {fold}/images/fold{fold}/images.npy",
                   "masks": "Fold {fold}/masks/fold{fold}/masks.npy",
                   "mask_channels": ["neoplastic", "inflammatory", None]},
        "labels": {"neoplastic": "neoplastic cell nucleus", "inflammatory": "inflammatory cell nucleus"},
        "questions": {"options_name": "nucleus type", "target_name": "nucleus", "n_options": 3},
    }
    (manifests / "nuclei_arrays.yaml").write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    return images, masks


def config(root):
    return BuildConfig(manifests_dir=root / "manifests" / "datasets", data_dir=root / "data", repo_root=root)


def test_array_items_reach_the_release_with_their_exact_pixels_and_masks(tmp_path):
    from datasets import load_dataset

    images, masks = make_repo(tmp_path)
    report = run_build(config(tmp_path))
    assert report.exit_code == 0, report.failed
    assert report.release_rows == {"box_grounded_classification": 4, "mask_grounded_classification": 4,
                                   "object_detection": 4}
    rows = load_dataset(str(tmp_path / "data" / "release"), "mask_grounded_classification", split="test",
                        cache_dir=str(tmp_path / "hf"))
    released = {np.asarray(row["image"]).tobytes(): row for row in rows}
    for index in range(2):
        pixels = images[index].astype(np.uint8)
        for channel, value in ((0, 3), (1, 9)):
            row = next(r for r in rows if np.array_equal(np.asarray(r["image"]), pixels)
                       and np.array_equal(np.asarray(r["mask"]) > 0, masks[index, ..., channel] == value))
            ys, xs = np.nonzero(masks[index, ..., channel] == value)
            assert row["boxes"] == [[xs.min(), ys.min(), xs.max() + 1, ys.max() + 1]]
    assert len(released) == 2


def test_a_rebuild_is_a_no_op_and_a_lost_cache_file_is_made_again(tmp_path):
    make_repo(tmp_path)
    run_build(config(tmp_path))
    cache = tmp_path / "data" / "work" / "nuclei_arrays" / "layout-cache"
    derived = sorted(cache.glob("*/*.png"))
    assert len(derived) == 4  # two images, two assembled masks
    stamps = {p: p.stat().st_mtime_ns for p in derived}
    assert run_build(config(tmp_path)).datasets[0].ran == []
    derived[0].unlink()
    report = run_build(config(tmp_path))
    assert report.exit_code == 0 and "layout" in report.datasets[0].ran
    assert derived[0].exists()
    assert {p: p.stat().st_mtime_ns for p in derived[1:]} == {p: stamps[p] for p in derived[1:]}
