"""Names inside annotation files that lead out of the dataset's folder (issue 32, points 1 and 9): a LabelMe
`imagePath: ../…` or a CVAT image name opens nothing outside, not even a header; an annotations glob never takes
the toolkit's own `.mmbu-fetch.json`."""
from __future__ import annotations

import json

import numpy as np
from PIL import Image
from support.build_manifests import make_manifest

from mmbu.build.fetch import COMPLETION_RECORD
from mmbu.build.layouts import files as layout_files
from mmbu.build.layouts import read_samples

TASKS = ["mask_grounded_classification", "box_grounded_classification", "object_detection"]
SHAPE = {"label": "cell", "points": [[2, 2], [12, 2], [12, 12]], "shape_type": "polygon"}


def _outside_image(tmp_path):
    """A real image beside the dataset's folder whose size would show if anything read its header."""
    Image.fromarray(np.zeros((555, 777), np.uint8)).save(tmp_path / "outside.png")
    return tmp_path / "outside.png"


def _opened(monkeypatch) -> list:
    """The paths whose header the layouts read for a size."""
    seen, original = [], layout_files.image_size

    def spy(path, *args, **kwargs):
        seen.append(path)
        return original(path, *args, **kwargs)

    monkeypatch.setattr("mmbu.build.layouts.polygons.image_size", spy)
    return seen


def test_a_labelme_image_path_outside_the_folder_opens_nothing(tmp_path, monkeypatch):
    outside = _outside_image(tmp_path)
    raw = tmp_path / "raw"
    (raw / "ann").mkdir(parents=True)
    Image.fromarray(np.zeros((40, 50), np.uint8)).save(raw / "ann" / "inside.png")
    for name, image_path in (("evil", "../../outside.png"), ("absolute", str(outside)), ("good", "inside.png")):
        (raw / "ann" / f"{name}.json").write_text(json.dumps({
            "shapes": [SHAPE], "imagePath": image_path, "imageHeight": 555, "imageWidth": 777}))
    opened = _opened(monkeypatch)
    layout = {"kind": "polygons", "format": "labelme_json", "annotations": "ann/*.json"}

    samples, exclusions = read_samples(make_manifest(layout, labels={"cell": "cell"}, tasks=TASKS), raw,
                                       tmp_path / "cache")

    assert [s.source_path for s in samples] == []  # the good one declares 777x555 but is 50x40
    reasons = {e.item: e.reason for e in exclusions}
    assert reasons["ann/evil.json"] == (f"names the image {raw / 'ann' / '../../outside.png'}, which lies outside "
                                        "the dataset's folder; only files inside it are read")
    assert reasons["ann/absolute.json"].startswith(f"names the image {outside}, which lies outside")
    assert outside not in [p.resolve() for p in opened] and (raw / "ann" / "inside.png") in opened


def test_a_cvat_image_name_outside_the_folder_opens_nothing(tmp_path, monkeypatch):
    _outside_image(tmp_path)
    raw = tmp_path / "raw"
    (raw / "images").mkdir(parents=True)
    (raw / "annotations.xml").write_text(
        '<annotations><image id="0" name="../../outside.png" width="777" height="555">'
        '<box label="cell" xtl="1" ytl="1" xbr="5" ybr="5"/></image></annotations>')
    opened = _opened(monkeypatch)
    layout = {"kind": "polygons", "format": "cvat_xml", "annotations": "annotations.xml", "image_root": "images"}

    samples, exclusions = read_samples(make_manifest(layout, labels={"cell": "cell"}, tasks=TASKS), raw,
                                       tmp_path / "cache")

    assert samples == [] and opened == []
    assert [(e.item, e.reason.endswith("which lies outside the dataset's folder; only files inside it are read"))
            for e in exclusions] == [("annotations.xml", True)]


def test_an_annotations_glob_never_takes_the_toolkits_completion_record(tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    Image.fromarray(np.zeros((40, 50), np.uint8)).save(raw / "a.png")
    (raw / "a.json").write_text(json.dumps({"shapes": [SHAPE], "imagePath": "a.png", "imageHeight": 40,
                                            "imageWidth": 50}))
    (raw / COMPLETION_RECORD).write_text(json.dumps({"dataset_id": "x", "files": [], "stored": []}))
    layout = {"kind": "polygons", "format": "labelme_json", "annotations": "*.json"}

    samples, exclusions = read_samples(make_manifest(layout, labels={"cell": "cell"}, tasks=TASKS), raw,
                                       tmp_path / "cache")

    assert [s.source_path for s in samples] == ["a.png"] and exclusions == []
