"""The layouts added for the catalogue's gaps reach the release: a colour-coded mask (BUS-UCLM), base64 image text
in Parquet (SurgWound), GeoJSON polygons (PUMA) and one array per image (LyNSeC), built together with `run_build`."""
from __future__ import annotations

import base64
import io
import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import tifffile
import yaml
from PIL import Image

from support.build_repo import built_release

METADATA = {
    "image_source": "synthetic test images", "dataset_name": "synthetic", "domain": "pathology",
    "modality": "light microscopy", "sub_modality": "brightfield microscopy", "specimen": "human",
    "topic": "test", "original_task": "test", "url": "https://example.org/t",
}
BASE = {"license": "CC-BY-4.0", "citation": "test data", "curation": {"round": 3, "reviewers": ["tester"]},
        "metadata": METADATA}
GROUNDED = ["mask_grounded_classification", "box_grounded_classification", "object_detection"]


def write_manifest(root, document):
    path = root / "manifests" / "datasets" / f"{document['id']}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({**BASE, **document}, sort_keys=False), encoding="utf-8")


def make_repo(root):
    """Small copies of the trees the layout tests cite (see tests/build/layouts/test_colour_masks.py,
    test_parquet.py, test_geojson_polygons.py, test_array_files.py for the sources)."""
    src = root / "src"
    rgb = np.zeros((30, 40, 3), np.uint8)
    rgb[4:12, 5:15] = (0, 255, 0)
    rgb[18:26, 22:36] = (255, 0, 0)
    (src / "bus" / "BUS-UCLM" / "images").mkdir(parents=True)
    (src / "bus" / "BUS-UCLM" / "masks").mkdir(parents=True)
    Image.fromarray(np.full((30, 40, 3), 90, np.uint8)).save(src / "bus" / "BUS-UCLM" / "images" / "case_01.png")
    Image.fromarray(rgb).save(src / "bus" / "BUS-UCLM" / "masks" / "case_01.png")
    write_manifest(root, {
        "id": "bus_colours", "title": "colour masks", "source": {"kind": "local", "path": "src/bus"}, "tasks": GROUNDED,
        "layout": {"kind": "image_mask_pairs", "images": "BUS-UCLM/images/*.png", "masks": "BUS-UCLM/masks/*.png",
                   "mask_colors": {"0,255,0": "benign", "255,0,0": "malignant"}, "instances": "components"},
        "labels": {"benign": "benign-looking lesion", "malignant": "malignant-looking lesion"},
        "questions": {"options_name": "lesion appearance", "target_name": "lesion", "n_options": 3}})

    jpegs = []
    for value in (40, 200):
        buffer = io.BytesIO()
        Image.fromarray(np.full((16, 24, 3), value, np.uint8)).save(buffer, format="JPEG", quality=95)
        jpegs.append(buffer.getvalue())
    (src / "wounds" / "default" / "train").mkdir(parents=True)
    pq.write_table(pa.table({"field": ["Healing Status", "Closure Method", "Healing Status"],
                             "image": [base64.b64encode(jpegs[0]).decode(), "x", base64.b64encode(jpegs[1]).decode()],
                             "answer": ["Healed", "Sutures", "Not Healed"]}),
                   src / "wounds" / "default" / "train" / "0000.parquet")
    write_manifest(root, {
        "id": "wound_text", "title": "base64 images", "source": {"kind": "local", "path": "src/wounds"},
        "tasks": ["ungrounded_classification"],
        "layout": {"kind": "parquet", "files": "default/{split}/*.parquet", "image_encoding": "base64",
                   "where": {"field": ["Healing Status"]}, "label_column": "answer"},
        "labels": {"Healed": "healed wound", "Not Healed": "wound not healed"},
        "questions": {"options_name": "wound healing status", "n_options": 3}})

    rois = src / "puma" / "01_training_dataset_tif_ROIs"
    rois.mkdir(parents=True)
    tifffile.imwrite(rois / "training_set_metastatic_roi_001.tif", np.full((32, 32, 4), 200, np.uint8))
    notes = src / "puma" / "01_training_dataset_geojson_nuclei"
    notes.mkdir()
    ring = [[4, 4], [14, 4], [14, 12], [4, 12], [4, 4]]
    notes.joinpath("training_set_metastatic_roi_001_nuclei.geojson").write_text(json.dumps(
        {"type": "FeatureCollection", "features": [{"type": "Feature", "id": "n1", "geometry": {
            "type": "Polygon", "coordinates": [ring]}, "properties": {"classification": {"name": "nuclei_tumor"}}}]}))
    write_manifest(root, {
        "id": "puma_nuclei", "title": "geojson", "source": {"kind": "local", "path": "src/puma"}, "tasks": GROUNDED,
        "layout": {"kind": "polygons", "format": "geojson", "images": "01_training_dataset_tif_ROIs/{roi}.tif*",
                   "annotations": "01_training_dataset_geojson_nuclei/{roi}_nuclei.geojson",
                   "label_property": "classification.name"},
        "labels": {"nuclei_tumor": "tumour cell nucleus", "nuclei_stroma": "stromal cell nucleus"},
        "questions": {"options_name": "nucleus type", "target_name": "nucleus", "n_options": 3}})

    (src / "lynsec" / "lynsec 2").mkdir(parents=True)
    pixels = np.random.default_rng(9).integers(0, 256, (24, 32, 3)).astype(np.float64)
    ids = np.zeros((24, 32))
    ids[3:9, 4:12] = 5
    np.save(src / "lynsec" / "lynsec 2" / "0_l2.npy", np.dstack([pixels, ids]))
    write_manifest(root, {
        "id": "lynsec_files", "title": "per-file arrays", "source": {"kind": "local", "path": "src/lynsec"},
        "tasks": GROUNDED,
        "layout": {"kind": "arrays", "items": "file", "axes": "HWC",
                   "images": {"file": "lynsec {n:d}/{stem}.npy", "channels": [0, 1, 2]},
                   "masks": {"file": "lynsec {n:d}/{stem}.npy", "channels": [3]},
                   "instances": "ids", "instance_label": "nucleus"},
        "labels": {"nucleus": "cell nucleus", "other": "other structure"},
        "questions": {"options_name": "structure", "target_name": "nucleus", "n_options": 3}})
    return jpegs, rgb, pixels.astype(np.uint8)


def test_the_new_layouts_reach_the_release_with_exact_pixels_masks_and_boxes(tmp_path):
    from datasets import load_dataset

    jpegs, rgb, pixels = make_repo(tmp_path)
    release, cache = built_release(tmp_path)

    rows = load_dataset(release, "ungrounded_classification", split="test", cache_dir=cache)
    by_answer = {row["answer"]: np.asarray(row["image"]) for row in rows if row["dataset_id"] == "wound_text"}
    assert set(by_answer) == {"healed wound", "wound not healed"}  # the closure-method row was never a sample
    assert np.array_equal(by_answer["healed wound"], np.asarray(Image.open(io.BytesIO(jpegs[0]))))

    masks = load_dataset(release, "mask_grounded_classification", split="test", cache_dir=cache)
    lesions = {row["answer"]: row for row in masks if row["dataset_id"] == "bus_colours"}
    assert set(lesions) == {"benign-looking lesion", "malignant-looking lesion"}
    assert np.array_equal(np.asarray(lesions["benign-looking lesion"]["mask"]) > 0, (rgb == (0, 255, 0)).all(-1))
    assert lesions["malignant-looking lesion"]["boxes"] == [[22, 18, 36, 26]]
    nucleus, = [row for row in masks if row["dataset_id"] == "puma_nuclei"]
    assert nucleus["boxes"] == [[4, 4, 15, 13]] and (np.asarray(nucleus["mask"]) > 0).sum() == 11 * 9
    arrays, = [row for row in masks if row["dataset_id"] == "lynsec_files"]
    assert np.array_equal(np.asarray(arrays["image"]), pixels) and arrays["boxes"] == [[4, 3, 12, 9]]
