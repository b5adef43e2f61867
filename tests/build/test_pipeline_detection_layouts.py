"""The detection-source options reach the release: COCO-like corner boxes (MIDOG's `bbox_order`), headerless
per-image box files filtered by a column (`box_table` `annotations` + `columns` + `where`) and a `datasets`
`save_to_disk` Arrow folder (`parquet` over `.arrow`), built together with `run_build`."""
from __future__ import annotations

import io
import json

import numpy as np
import tifffile
from datasets import ClassLabel, Dataset, DatasetDict, Features, Image as ImageFeature, Sequence, Value
from PIL import Image
from support.build_repo import built_release, write_manifest

METADATA = {
    "image_source": "synthetic test images", "dataset_name": "synthetic", "domain": "pathology",
    "modality": "light microscopy", "sub_modality": "brightfield microscopy", "specimen": "human",
    "topic": "test", "original_task": "test", "url": "https://example.org/t",
}
TASKS = ["box_grounded_classification", "object_detection"]


def add_dataset(root, dataset_id, **fields):
    folder = root / "manifests" / "datasets"
    folder.mkdir(parents=True, exist_ok=True)
    write_manifest(folder, dataset_id, metadata=METADATA, tasks=TASKS, **fields)


def pixels(seed, height, width):
    return np.random.default_rng(seed).integers(0, 256, (height, width, 3)).astype(np.uint8)


def make_repo(root):
    """Small copies of the trees the layout tests cite (tests/build/layouts/test_detection_layouts.py,
    test_box_tables.py, test_arrow_tables.py)."""
    src = root / "src"
    (src / "midog").mkdir(parents=True)
    slide = pixels(1, 60, 80)
    tifffile.imwrite(src / "midog" / "001.tiff", slide)
    (src / "midog" / "MIDOG.json").write_text(json.dumps({
        "images": [{"license": 1, "file_name": "001.tiff", "id": 1, "width": 80, "height": 60}],
        "categories": [{"id": 1, "name": "mitotic figure"}, {"id": 2, "name": "not mitotic figure"}],
        "annotations": [{"bbox": [10, 12, 30, 32], "category_id": 1, "image_id": 1, "id": 1},
                        {"bbox": [50, 20, 70, 40], "category_id": 2, "image_id": 1, "id": 2}]}), encoding="utf-8")
    add_dataset(root, "midog_corners", **{
        "source": {"kind": "local", "path": "src/midog"},
        "layout": {"kind": "coco", "annotations": "MIDOG.json", "bbox_order": ["x1", "y1", "x2", "y2"]},
        "labels": {"mitotic figure": "mitotic figure", "not mitotic figure": "cell resembling a mitotic figure"},
        "questions": {"options_name": "cell appearance", "target_name": "mitotic figure", "n_options": 3}})

    (src / "astro" / "images").mkdir(parents=True)
    (src / "astro" / "positions").mkdir()
    field = pixels(2, 50, 70)
    Image.fromarray(field).save(src / "astro" / "images" / "1.png")
    tail = "0 0 0 0 0 0 0"
    (src / "astro" / "positions" / "1.txt").write_text(
        f"astrocyte 0 0 0 4 6 20 26 {tail}\nDontCare -1 -1 -10 30 5 60 45 {tail}\n", encoding="utf-8")
    add_dataset(root, "astro_positions", **{
        "source": {"kind": "local", "path": "src/astro"},
        "layout": {"kind": "box_table", "annotations": "positions/{n}.txt", "images": "images/{n}.png",
                   "delimiter": "whitespace", "label": "type", "where": {"type": ["astrocyte"]},
                   "columns": ["type", "truncated", "occluded", "alpha", "left", "top", "right", "bottom",
                               "_", "_", "_", "_", "_", "_", "_"],
                   "box": {"x1": "left", "y1": "top", "x2": "right", "y2": "bottom"}},
        "labels": {"astrocyte": "astrocyte", "neuron": "neuron"},
        "questions": {"options_name": "cell type", "target_name": "astrocyte", "n_options": 3}})

    frame = pixels(3, 40, 64)
    buffer = io.BytesIO()
    Image.fromarray(frame).save(buffer, format="PNG")
    features = Features({"image": ImageFeature(),
                         "objects": {"bbox": Sequence(Sequence(Value("float32"), length=4)),
                                     "category": Sequence(ClassLabel(names=["cell", "debris"]))}})
    DatasetDict({"train": Dataset.from_dict({"image": [buffer.getvalue()], "objects": [
        {"bbox": [[2, 3, 12, 10], [40, 20, 15, 15]], "category": [0, 1]}]}, features=features)}
                ).save_to_disk(src / "frames")
    add_dataset(root, "arrow_frames", **{
        "source": {"kind": "local", "path": "src/frames"},
        "layout": {"kind": "parquet", "files": "{split}/data-*.arrow", "objects_column": "objects"},
        "labels": {"cell": "cell", "debris": "debris"},
        "questions": {"options_name": "object type", "target_name": "cell", "n_options": 3}})
    return slide, field, frame


def test_the_detection_options_reach_the_release_with_exact_pixels_and_boxes(tmp_path):
    from datasets import load_dataset

    slide, field, frame = make_repo(tmp_path)
    release, cache = built_release(tmp_path)

    rows = load_dataset(release, "box_grounded_classification", split="test", cache_dir=cache)
    by_dataset: dict[str, dict] = {}
    for row in rows:
        by_dataset.setdefault(row["dataset_id"], {})[row["answer"]] = row
    midog = by_dataset["midog_corners"]
    assert set(midog) == {"mitotic figure", "cell resembling a mitotic figure"}
    assert midog["mitotic figure"]["boxes"] == [[10, 12, 30, 32]]  # corners, not [10, 12, 40, 44]
    assert midog["cell resembling a mitotic figure"]["boxes"] == [[50, 20, 70, 40]]
    assert np.array_equal(np.asarray(midog["mitotic figure"]["image"]), slide)
    astro, = by_dataset["astro_positions"].values()  # the DontCare line was never an object
    assert astro["boxes"] == [[4, 6, 20, 26]] and np.array_equal(np.asarray(astro["image"]), field)
    arrow = by_dataset["arrow_frames"]
    assert arrow["cell"]["boxes"] == [[2, 3, 14, 13]] and arrow["debris"]["boxes"] == [[40, 20, 55, 35]]
    assert np.array_equal(np.asarray(arrow["cell"]["image"]), frame)

    detection = load_dataset(release, "object_detection", split="test", cache_dir=cache)
    assert {row["dataset_id"] for row in detection} == {"midog_corners", "astro_positions", "arrow_frames"}
    astro_rows = [row for row in detection if row["dataset_id"] == "astro_positions"]
    assert [row["answer"] for row in astro_rows] == ["[4, 6, 20, 26]"]
