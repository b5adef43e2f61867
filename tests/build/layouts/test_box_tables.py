"""box_table: boxes in one-off JSON or CSV formats, found by field names (corners, corner+size, centre+size;
row/column order; pixels or fractions; rows meaning 'no object')."""
from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image
from pydantic import ValidationError
from support.build_manifests import make_manifest, write_dicom

from mmbu.build.layouts import read_samples

MALARIA_LABELS = {"red blood cell": "red blood cell", "trophozoite": "trophozoite", "ring": "ring-stage parasite"}


def bbbc041(raw):
    """BBBC041 (data.broadinstitute.org/bbbc/BBBC041/malaria.zip): `malaria/images/<uuid>.png` and
    `malaria/training.json`, a list of `{"image": {"pathname": "/images/<name>", "shape": {"r", "c", "channels"}},
    "objects": [{"bounding_box": {"minimum": {"r", "c"}, "maximum": {"r", "c"}}, "category"}]}` (as read by
    dataset-ninja's 'Malaria Bounding Boxes' src/convert.py; /work/shared/reference/catalogue-sources.md)."""
    names = ["8d02117d-6c71-4e47-b50a-6cc8d5eb1d55.png", "6b14c855-8561-417c-97a4-63fa552842fd.png"]
    for name in names:
        (raw / "malaria" / "images").mkdir(parents=True, exist_ok=True)
        Image.fromarray(np.full((120, 160, 3), 200, np.uint8)).save(raw / "malaria" / "images" / name)
    records = [
        {"image": {"checksum": "x", "pathname": f"/images/{names[0]}", "shape": {"r": 120, "c": 160, "channels": 3}},
         "objects": [
             {"bounding_box": {"minimum": {"r": 10, "c": 20}, "maximum": {"r": 30, "c": 50}}, "category": "red blood cell"},
             {"bounding_box": {"minimum": {"r": 60, "c": 100}, "maximum": {"r": 90, "c": 140}}, "category": "trophozoite"},
             {"bounding_box": {"minimum": {"r": 100, "c": 150}, "maximum": {"r": 130, "c": 170}}, "category": "ring"},
             {"bounding_box": {"minimum": {"r": 200, "c": 200}, "maximum": {"r": 220, "c": 230}}, "category": "ring"},
             {"category": "difficult"}]},
        {"image": {"pathname": f"/images/{names[1]}", "shape": {"r": 120, "c": 160, "channels": 3}},
         "objects": [{"bounding_box": {"minimum": {"r": 5, "c": 5}, "maximum": {"r": 5, "c": 25}},
                      "category": "red blood cell"}]},
    ]
    (raw / "malaria" / "training.json").write_text(json.dumps(records), encoding="utf-8")
    return names


BBBC041_LAYOUT = {"kind": "box_table", "table": "malaria/training.json", "image": "image.pathname", "objects": "objects",
                  "label": "category", "image_root": "malaria",
                  "box": {"x1": "bounding_box.minimum.c", "y1": "bounding_box.minimum.r",
                          "x2": "bounding_box.maximum.c", "y2": "bounding_box.maximum.r"}}


def test_json_records_with_row_column_corners(tmp_path):
    raw = tmp_path / "raw"
    names = bbbc041(raw)
    samples, exclusions = read_samples(make_manifest(BBBC041_LAYOUT, labels=MALARIA_LABELS, tasks=["object_detection"]), raw)

    sample, = samples
    assert sample.source_path == f"malaria/images/{names[0]}" and sample.image_size == (160, 120)
    assert [(r.label, r.instance, r.box) for r in sample.regions] == [
        ("red blood cell", "object-1", (20.0, 10.0, 50.0, 30.0)), ("trophozoite", "object-2", (100.0, 60.0, 140.0, 90.0)),
        ("ring", "object-3", (150.0, 100.0, 160.0, 120.0))]  # clipped to the image
    reasons = {e.item.rsplit("/", 1)[-1]: e.reason for e in exclusions}
    assert reasons[f"{names[0]}#object-4"] == "box [200.0, 200.0, 230.0, 220.0] lies outside the 160x120 image"
    assert reasons[f"{names[0]}#object-5"] == "the record has no field 'bounding_box' (found: 'category')"
    assert reasons[f"{names[1]}#object-1"] == "box [5.0, 5.0, 25.0, 5.0] has no area"
    assert reasons[names[1]] == "no annotated object with a known label is left in this image"


def test_a_misspelt_field_is_named_with_the_closest_one(tmp_path):
    raw = tmp_path / "raw"
    bbbc041(raw)
    layout = {**BBBC041_LAYOUT, "label": "catgory"}
    samples, exclusions = read_samples(make_manifest(layout, labels=MALARIA_LABELS, tasks=["object_detection"]), raw)
    assert "the record has no field 'catgory'; did you mean 'category'?" in {e.reason for e in exclusions}


def rsna_pneumonia(raw):
    """RSNA pneumonia detection: `stage_2_train_labels.csv` with `patientId,x,y,width,height,Target`, one row per
    box, Target 0 with empty box fields for an image without opacity; images `stage_2_train_images/<patientId>.dcm`
    (mlmed/torchxrayvision@f4087a0b0d0cdc6a5877fb5456965b6d29adb1e5:torchxrayvision/datasets.py RSNA_Pneumonia_Dataset)."""
    ids = ["0004cfab-14fd-4e49-80ba-63a80b6bddd6", "00313ee0-9eaa-42f4-b0ab-c148ed3241cd"]
    for patient in ids:
        write_dicom(raw / "stage_2_train_images" / f"{patient}.dcm", rows=100, columns=120, Modality="CR")
    (raw / "stage_2_train_labels.csv").write_text(
        "patientId,x,y,width,height,Target\n"
        f"{ids[0]},,,,,0\n"
        f"{ids[1]},10.5,20,30,40,1\n"
        f"{ids[1]},60,30,40,,1\n",  # a box with a missing number
        encoding="utf-8")
    return ids


def test_csv_rows_one_box_each_with_rows_meaning_no_object(tmp_path):
    raw = tmp_path / "raw"
    ids = rsna_pneumonia(raw)
    layout = {"kind": "box_table", "table": "stage_2_train_labels.csv", "image": "patientId", "fixed_label": "opacity",
              "box": {"x1": "x", "y1": "y", "width": "width", "height": "height"}, "no_object": {"Target": ["0"]},
              "image_root": "stage_2_train_images", "image_suffix": ".dcm"}
    samples, exclusions = read_samples(make_manifest(layout, labels={"opacity": "lung opacity"},
                                                     tasks=["object_detection"]), raw)
    sample, = samples
    assert sample.source_path == f"stage_2_train_images/{ids[1]}.dcm" and sample.image_size == (120, 100)
    assert [(r.instance, r.box) for r in sample.regions] == [("row-3", (10.5, 20.0, 40.5, 60.0))]
    reasons = {e.item: e.reason for e in exclusions}
    assert reasons[f"stage_2_train_images/{ids[0]}.dcm"] == ("the table marks this image as holding no object "
                                                             "(Target = '0'); box questions need one")
    assert reasons[f"stage_2_train_images/{ids[1]}.dcm#row-4"].startswith("the box is incomplete")


def test_centre_size_fractions_and_list_fields(tmp_path):
    raw = tmp_path / "raw"
    Image.fromarray(np.zeros((50, 200), np.uint8)).save(raw.mkdir() or raw / "a.png")
    (raw / "boxes.json").write_text(json.dumps({"items": [
        {"file": "a.png", "boxes": [{"bbox": [0.5, 0.5, 0.2, 0.4], "cls": "x"}]}]}), encoding="utf-8")
    layout = {"kind": "box_table", "table": "boxes.json", "records": "items", "image": "file", "objects": "boxes",
              "label": "cls", "units": "fractions", "box": {"list": "bbox", "order": ["cx", "cy", "width", "height"]}}
    samples, _ = read_samples(make_manifest(layout, labels={"x": "x"}, tasks=["object_detection"]), raw)
    assert samples[0].regions[0].box == (80.0, 15.0, 120.0, 35.0)


@pytest.mark.parametrize("layout, message", [
    ({"box": {"x1": "a", "y1": "b", "x2": "c"}}, "do not pin a box down"),
    ({"box": {"list": "bbox", "order": ["x1", "y1", "x2", "x2"]}}, "do not pin a box down"),
    ({"box": {"list": "bbox"}}, "needs `order`"),
    ({"box": {"x1": "a", "y1": "b", "x2": "c", "y2": "d"}, "fixed_label": "x"}, "exactly one of label"),
    ({"box": {"x1": "a", "y1": "b", "x2": "c", "y2": "d"}, "table": "t.csv", "objects": "objs"}, "one row per box"),
])
def test_box_table_fields_are_checked(layout, message):
    with pytest.raises(ValidationError, match=message):
        make_manifest({"kind": "box_table", "table": "t.json", "image": "f", "label": "c", **layout}, labels={"x": "x"},
                      tasks=["object_detection"])
