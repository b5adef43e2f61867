"""box_table: boxes in one-off JSON or CSV formats, found by field names (corners, corner+size, centre+size;
row/column order; pixels or fractions; rows meaning 'no object')."""
from __future__ import annotations

import csv
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


NUCLS_COLUMNS = ["raw_classification", "main_classification", "super_classification", "type", "xmin", "ymin", "xmax",
                 "ymax", "coords_x", "coords_y"]


def nucls(raw):
    """NuCLS's tree (sites.google.com/view/nucls/data-format): `rgb/<fov>.png` beside `csv/<fov>.csv`, one coordinate
    table per field of view with the columns `raw_classification, main_classification, super_classification, type
    (rectangles v.s. polylines), xmin, ymin, xmax, ymax, coords_x, coords_y` (comma-separated boundaries). The FOV
    names here are short stand-ins; the tables are written with the csv module."""
    (raw / "rgb").mkdir(parents=True)
    (raw / "csv").mkdir()
    rows = {"fov_1": [["tumor", "tumor_nonMitotic", "tumor_any", "rectangle", "10", "12", "30", "40", "10,30,30,10",
                       "12,12,40,40"],
                      ["lymphocyte", "nonTILnonMQ_stromal", "sTIL", "polyline", "40", "5", "60", "25", "40,60,50",
                       "5,5,25"],
                      ["fibroblast", "nonTILnonMQ_stromal", "nonTIL_stromal", "rectangle", "50", "30", "90", "50",
                       "50,90,90,50", "30,30,50,50"]],
            "fov_2": [["tumor", "tumor_nonMitotic", "tumor_any", "polyline", "1", "1", "9", "9", "1,9,9", "1,1,9"]]}
    for fov, lines in rows.items():
        Image.fromarray(np.full((60, 80, 3), 180, np.uint8)).save(raw / "rgb" / f"{fov}.png")
        with open(raw / "csv" / f"{fov}.csv", "w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle)
            writer.writerow(NUCLS_COLUMNS)
            writer.writerows(lines)


NUCLS_LAYOUT = {"kind": "box_table", "annotations": "csv/{fov}.csv", "images": "rgb/{fov}.png",
                "label": "raw_classification", "where": {"type": ["rectangle"]},
                "box": {"x1": "xmin", "y1": "ymin", "x2": "xmax", "y2": "ymax"}}
NUCLS_LABELS = {"tumor": "tumour cell nucleus", "fibroblast": "fibroblast nucleus", "lymphocyte": "lymphocyte nucleus"}


def test_one_box_file_per_image_with_a_row_filter(tmp_path):
    raw = tmp_path / "raw"
    nucls(raw)
    samples, exclusions = read_samples(make_manifest(NUCLS_LAYOUT, labels=NUCLS_LABELS, tasks=["object_detection"]),
                                       raw)

    sample, = samples
    assert sample.source_path == "rgb/fov_1.png" and sample.image_size == (80, 60)
    # the polyline row (line 3) is no object; the fibroblast box is clipped at the image's right edge
    assert [(r.label, r.instance, r.box) for r in sample.regions] == [
        ("tumor", "row-2", (10.0, 12.0, 30.0, 40.0)), ("fibroblast", "row-4", (50.0, 30.0, 80.0, 50.0))]
    assert [(e.item, e.reason) for e in exclusions] == [
        ("rgb/fov_2.png", "none of its 1 boxes has type in ['rectangle']")]


def test_a_filter_column_the_files_lack_is_named_with_those_they_have(tmp_path):
    raw = tmp_path / "raw"
    nucls(raw)
    layout = {**NUCLS_LAYOUT, "where": {"shape": ["rectangle"]}}
    samples, exclusions = read_samples(make_manifest(layout, labels=NUCLS_LABELS, tasks=["object_detection"]), raw)
    assert samples == []
    found = ("(found: 'raw_classification', 'main_classification', 'super_classification', 'type', 'xmin', 'ymin', "
             "'xmax', 'ymax' and 2 more)")
    assert [(e.item, e.reason) for e in exclusions] == [
        (f"csv/{fov}.csv", f"the table has no column 'shape' {found}") for fov in ("fov_1", "fov_2")]


KITTI_COLUMNS = ["type", "truncated", "occluded", "alpha", "left", "top", "right", "bottom", "_", "_", "_", "_", "_",
                 "_", "_"]


def kitti_positions(raw):
    """One headerless text file of boxes per image, one box per line in KITTI's 15 space-separated fields (`type
    truncated occluded alpha left top right bottom h w l x y z rotation_y`, left/top/right/bottom in 0-based image
    pixels; KITTI object devkit readme). catalogue-det reports this shape for BBBC042's `positions/<n>.txt` beside
    `images/<n>.png` from a loader it could not cite, so the tree here is BBBC042-like, not BBBC042's verified one."""
    (raw / "images").mkdir(parents=True)
    (raw / "positions").mkdir()
    for n in (1, 2, 3, 4):
        Image.fromarray(np.full((100, 120, 3), 90, np.uint8)).save(raw / "images" / f"{n}.png")
    tail = "0 0 0 0 0 0 0"
    (raw / "positions" / "1.txt").write_text(
        f"astrocyte 0 0 0 10.5 20 40.5 60 {tail}\n\nastrocyte 0 0 0 100 80 140 120 {tail}\n"
        "astrocyte 0 0 0 5 5 25\n", encoding="utf-8")  # a blank line, a box clipped, a short line
    (raw / "positions" / "2.txt").write_text("", encoding="utf-8")
    (raw / "positions" / "3.txt").write_text(f"astrocyte 0 0 0 50 50 30 70 {tail}\n", encoding="utf-8")
    (raw / "positions" / "9.txt").write_text(f"astrocyte 0 0 0 1 1 5 5 {tail}\n", encoding="utf-8")


def test_headerless_per_image_box_files_read_columns_by_position(tmp_path):
    raw = tmp_path / "raw"
    kitti_positions(raw)
    layout = {"kind": "box_table", "annotations": "positions/{n}.txt", "images": "images/{n}.png",
              "columns": KITTI_COLUMNS, "delimiter": "whitespace", "label": "type",
              "box": {"x1": "left", "y1": "top", "x2": "right", "y2": "bottom"}}
    samples, exclusions = read_samples(make_manifest(layout, labels={"astrocyte": "astrocyte"},
                                                     tasks=["object_detection"]), raw)

    sample, = samples
    assert sample.source_path == "images/1.png"
    assert [(r.label, r.instance, r.box) for r in sample.regions] == [
        ("astrocyte", "line-1", (10.5, 20.0, 40.5, 60.0)), ("astrocyte", "line-3", (100.0, 80.0, 120.0, 100.0))]
    assert {e.item: e.reason for e in exclusions} == {
        "positions/1.txt:4": "the line has 7 fields but columns names 15",
        "positions/2.txt": "the box file lists no box; box questions need one",
        "images/3.png#line-1": "box [50.0, 50.0, 30.0, 70.0] has no area",
        "images/3.png": "no annotated object with a known label is left in this image",
        "positions/9.txt": "annotation without a matching image",
        "images/4.png": "no annotation file matching 'positions/{n}.txt' for this image"}


def test_columns_ending_in_dots_read_the_leading_fields_of_lines_of_any_length(tmp_path):
    """BBBC042's positions/<n>.txt: the boxes are columns 5-8 (0-based 4-7) of headerless whitespace lines, as
    ver228/semantic_filtering@606be57:check_results/fasterrccn_validation/flow.py reads them
    (`df.loc[:, 4:7]`), and no source says how many fields follow; KITTI writes 15, some tools a 16th score."""
    raw = tmp_path / "raw"
    (raw / "images").mkdir(parents=True)
    (raw / "positions").mkdir()
    Image.fromarray(np.full((100, 120, 3), 90, np.uint8)).save(raw / "images" / "7.tif")
    (raw / "positions" / "7.txt").write_text(
        "Car 0 0 0 10 20 40 60 0 0 0 0 0 0 0\n"          # 15 fields
        "Car 0.0 0 0.0 50 5 90 45 0 0 0 0 0 0 0 0.9\n"    # 16 fields
        "Car 0 0 0 1 2 3\n", encoding="utf-8")             # 7 fields: too short for the named columns
    layout = {"kind": "box_table", "annotations": "positions/{n}.txt", "images": "images/{n}.tif",
              "delimiter": "whitespace", "columns": ["_", "_", "_", "_", "left", "top", "right", "bottom", "..."],
              "fixed_label": "astrocyte", "box": {"x1": "left", "y1": "top", "x2": "right", "y2": "bottom"}}
    samples, exclusions = read_samples(make_manifest(layout, labels={"astrocyte": "astrocyte"},
                                                     tasks=["object_detection"]), raw)

    sample, = samples
    assert [(r.label, r.instance, r.box) for r in sample.regions] == [
        ("astrocyte", "line-1", (10.0, 20.0, 40.0, 60.0)), ("astrocyte", "line-2", (50.0, 5.0, 90.0, 45.0))]
    assert {e.item: e.reason for e in exclusions} == {
        "positions/7.txt:3": "the line has 7 fields but columns names at least 8"}


def test_one_headerless_table_for_all_images(tmp_path):
    raw = tmp_path / "raw"
    (raw / "img").mkdir(parents=True)
    Image.fromarray(np.zeros((40, 50), np.uint8)).save(raw / "img" / "a.png")
    with open(raw / "boxes.csv", "w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows([["a.png", "3", "4", "10", "12", "cell", "manual"],
                                      ["a.png", "20", "4", "10", "12", "cell", "automatic"]])
    layout = {"kind": "box_table", "table": "boxes.csv", "columns": ["file", "x", "y", "w", "h", "class", "source"],
              "image": "file", "image_root": "img", "label": "class", "where": {"source": ["manual"]},
              "box": {"x1": "x", "y1": "y", "width": "w", "height": "h"}}
    samples, exclusions = read_samples(make_manifest(layout, labels={"cell": "cell"}, tasks=["object_detection"]), raw)
    assert [(r.instance, r.box) for r in samples[0].regions] == [("line-1", (3.0, 4.0, 13.0, 16.0))]
    assert exclusions == []


@pytest.mark.parametrize("layout, message", [
    ({"table": "t.csv", "annotations": "b/{n}.txt", "images": "i/{n}.png"}, "not both"),
    ({"table": None, "annotations": "b/{n}.txt", "image": None}, "give images"),
    ({"table": None, "annotations": "b/{n}.txt", "images": "i/{m}.png", "image": None}, "shares no named part"),
    ({"table": None, "annotations": "b/{n}.txt", "images": "i/{n}.png"}, "leave out image"),
    ({"table": "t.csv", "columns": ["f", "a", "b", "c", "dd"]}, "'d' is not among columns .*did you mean 'dd'"),
    ({"table": "t.csv", "columns": ["f", "a", "a", "c", "d"]}, "names a column twice"),
    ({"table": "t.json", "columns": ["f", "a", "b", "c", "d"]}, "a JSON file names its fields"),
    ({"table": "t.csv", "columns": ["f", "...", "a", "b", "c", "d"]}, "'...' may only end columns .* position 2"),
    ({"table": "t.csv", "where": {"type": []}}, "where lists no value for 'type'"),
])
def test_per_image_files_columns_and_filters_are_checked(layout, message):
    base = {"kind": "box_table", "table": "t.csv", "image": "f", "fixed_label": "x",
            "box": {"x1": "a", "y1": "b", "x2": "c", "y2": "d"}}
    with pytest.raises(ValidationError, match=message):
        make_manifest({**base, **layout}, labels={"x": "x"}, tasks=["object_detection"])


# Synthetic regions of two slides in the shape of the region-keyed pathology tables (a slide column and a region
# column; the same region number recurs on every slide, so neither column alone names an image): each box is
# written here as the (slide, region) it belongs to, and the table's rows are these boxes interleaved.
REGION_BOXES = {
    ("A12", "01"): [("lymphocyte", (10, 12, 30, 28)), ("tumour cell", (40, 5, 60, 25))],
    ("A12", "02"): [("lymphocyte", (0, 0, 8, 9))],
    ("B7", "01"): [("tumour cell", (50, 30, 64, 48))],
}


def region_table(raw, *, extra_rows=()):
    import tifffile
    for (slide, roi), boxes in REGION_BOXES.items():
        (raw / "rois" / slide).mkdir(parents=True, exist_ok=True)
        tifffile.imwrite(raw / "rois" / slide / f"{roi}.tif", np.full((48, 64, 3), 180, np.uint8))
    rows = [(slide, roi, *box, label) for (slide, roi), boxes in REGION_BOXES.items() for label, box in boxes]
    rows = rows[::2] + rows[1::2] + list(extra_rows)  # a slide's rows are not together in the file
    with open(raw / "cells.csv", "w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows([("slide", "roi", "xmin", "ymin", "xmax", "ymax", "cell type"), *rows])


REGION_LAYOUT = {"kind": "box_table", "table": "cells.csv", "image": "{slide}/{roi}", "image_root": "rois",
                 "image_suffix": ".tif", "label": "cell type", "box": {"x1": "xmin", "y1": "ymin", "x2": "xmax",
                                                                      "y2": "ymax"}}
REGION_LABELS = {"lymphocyte": "lymphocyte", "tumour cell": "tumour cell"}


def test_a_template_of_fields_names_a_region_of_a_slide(tmp_path):
    raw = tmp_path / "raw"
    region_table(raw, extra_rows=[("B7", "", 1, 1, 5, 5, "lymphocyte")])
    samples, exclusions = read_samples(make_manifest(REGION_LAYOUT, labels=REGION_LABELS,
                                                     tasks=["object_detection"]), raw)
    found = {s.source_path: sorted((r.label, r.box) for r in s.regions) for s in samples}
    assert found == {f"rois/{slide}/{roi}.tif": sorted((label, tuple(map(float, box))) for label, box in boxes)
                     for (slide, roi), boxes in REGION_BOXES.items()}
    assert all(s.image_size == (64, 48) for s in samples)
    assert {e.item: e.reason for e in exclusions} == {"cells.csv:6": "the row has an empty image field (slide or roi)"}


def test_a_template_field_the_table_lacks_is_named(tmp_path):
    raw = tmp_path / "raw"
    region_table(raw)
    layout = {**REGION_LAYOUT, "image": "{slide}/{region}"}
    samples, exclusions = read_samples(make_manifest(layout, labels=REGION_LABELS, tasks=["object_detection"]), raw)
    assert samples == [] and [(e.item, e.reason) for e in exclusions] == [
        ("cells.csv", "the table has no column 'region' (found: 'slide', 'roi', 'xmin', 'ymin', 'xmax', 'ymax', "
                      "'cell type')")]


def test_a_template_of_json_fields(tmp_path):
    raw = tmp_path / "raw"
    region_table(raw)
    records = [{"slide": slide, "roi": roi, "cells": [{"box": list(box), "type": label} for label, box in boxes]}
               for (slide, roi), boxes in REGION_BOXES.items()]
    (raw / "cells.json").write_text(json.dumps(records), encoding="utf-8")
    layout = {"kind": "box_table", "table": "cells.json", "image": "{slide}/{roi}.tif", "image_root": "rois",
              "objects": "cells", "label": "type", "box": {"list": "box", "order": ["x1", "y1", "x2", "y2"]}}
    samples, exclusions = read_samples(make_manifest(layout, labels=REGION_LABELS, tasks=["object_detection"]), raw)
    assert {s.source_path: [r.box for r in s.regions] for s in samples} == {
        f"rois/{slide}/{roi}.tif": [tuple(map(float, box)) for _, box in boxes]
        for (slide, roi), boxes in REGION_BOXES.items()}
    assert exclusions == []


@pytest.mark.parametrize("layout, message", [
    ({"image": "{}/x"}, "is not a part name"),
    ({"image": "{slide}/*.tif"}, "cannot hold a wildcard"),
    ({"image": "{slide}/{roi}", "columns": ["slide", "a", "b", "c", "d"]}, "'roi' is not among columns"),
])
def test_image_templates_are_checked(layout, message):
    base = {"kind": "box_table", "table": "t.csv", "fixed_label": "x",
            "box": {"x1": "a", "y1": "b", "x2": "c", "y2": "d"}}
    with pytest.raises(ValidationError, match=message):
        make_manifest({**base, **layout}, labels={"x": "x"}, tasks=["object_detection"])


def follicle_cuts(raw):
    """Synthetic copy of the shape of the follicle-assessment release (vincentblot28/follicle-assessment@fc693f4:
    README.md and utils/ltt_utils.py): `01_ovary_cuts/ovary_images/<slide>/<slide>__<roi>.tif` and one
    `ovaries_annotations.json` read as annotations[slide][roi]["bboxes"] ([xmin, ymin, xmax, ymax]) with the
    parallel annotations[slide][roi]["classes"]."""
    import tifffile
    cuts = {"0A_a": {"roi0": [("PMF", [4, 6, 20, 22]), ("Primary", [30, 2, 70, 40])],
                     "roi1": [("Secondary", [1, 1, 9, 9])]},
            "2A_g": {"roi0": [("Primary", [10, 10, 60, 44])]}}
    folder = raw / "01_ovary_cuts" / "ovary_images"
    document = {}
    for slide, rois in cuts.items():
        (folder / slide).mkdir(parents=True, exist_ok=True)
        for roi, boxes in rois.items():
            tifffile.imwrite(folder / slide / f"{slide}__{roi}.tif", np.full((48, 80, 3), 200, np.uint8))
            document.setdefault(slide, {})[roi] = {"bboxes": [box for _, box in boxes],
                                                   "classes": [label for label, _ in boxes]}
    document["2A_g"]["roi1"] = {"bboxes": [[1, 1, 5, 5], [2, 2, 6, 6]], "classes": ["PMF"]}  # lists out of step
    document["2A_g"]["roi2"] = ["not", "a", "record"]
    (raw / "01_ovary_cuts" / "ovaries_annotations.json").write_text(json.dumps(document), encoding="utf-8")
    return cuts


def test_records_keyed_by_slide_and_region_with_parallel_lists(tmp_path):
    raw = tmp_path / "raw"
    cuts = follicle_cuts(raw)
    layout = {"kind": "box_table", "table": "01_ovary_cuts/ovaries_annotations.json", "keys": ["slide", "roi"],
              "image": "{slide}/{slide}__{roi}.tif", "image_root": "01_ovary_cuts/ovary_images",
              "objects": ["bboxes", "classes"], "label": "classes",
              "box": {"list": "bboxes", "order": ["x1", "y1", "x2", "y2"]}}
    labels = {"PMF": "primordial follicle", "Primary": "primary follicle", "Secondary": "secondary follicle"}
    samples, exclusions = read_samples(make_manifest(layout, labels=labels, tasks=["object_detection"]), raw)
    assert {s.source_path: [(r.label, r.box) for r in s.regions] for s in samples} == {
        f"01_ovary_cuts/ovary_images/{slide}/{slide}__{roi}.tif": [(label, tuple(map(float, box)))
                                                                  for label, box in boxes]
        for slide, rois in cuts.items() for roi, boxes in rois.items()}
    assert {e.item: e.reason for e in exclusions} == {
        "01_ovary_cuts/ovaries_annotations.json#2A_g/roi1":
            "the parallel lists differ in length (bboxes: 2, classes: 1)",
        "01_ovary_cuts/ovaries_annotations.json#2A_g/roi2": "the record is a list, not a mapping of fields"}


@pytest.mark.parametrize("layout, message", [
    ({"keys": ["slide", "slide"]}, "names a level twice"),
    ({"keys": ["slide name"]}, "is not a name"),
    ({"objects": ["bboxes"]}, "two or more different parallel lists"),
    ({"table": "t.csv", "keys": ["slide"]}, "a CSV box table has one row per box"),
    ({"table": "t.jsonl", "keys": ["slide"]}, "leave records and keys out"),
])
def test_keys_and_parallel_lists_are_checked(layout, message):
    base = {"kind": "box_table", "table": "t.json", "image": "f", "fixed_label": "x",
            "box": {"list": "b", "order": ["x1", "y1", "x2", "y2"]}}
    with pytest.raises(ValidationError, match=message):
        make_manifest({**base, **layout}, labels={"x": "x"}, tasks=["object_detection"])


def test_json_lines_one_record_per_line_with_records_of_one_image_merged(tmp_path):
    # annotations.jsonl as some releases write it: one JSON record per line, here one box per line, so an image's
    # boxes are spread over several lines; a damaged line is one exclusion and the others go on
    raw = tmp_path / "raw"
    for name in ("a.png", "b.png"):
        (raw / "images").mkdir(parents=True, exist_ok=True)
        Image.fromarray(np.full((100, 200, 3), 90, np.uint8)).save(raw / "images" / name)
    lines = [
        json.dumps({"image": "a.png", "finding": "nodule", "bbox": [10, 20, 40, 60]}),
        "",
        json.dumps({"image": "b.png", "finding": "effusion", "bbox": [100, 50, 190, 99]}),
        '{"image": "a.png", "finding": "nodule", "bbox": [12',
        json.dumps({"image": "a.png", "finding": "effusion", "bbox": [150, 10, 170, 30]}),
    ]
    (raw / "annotations.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    manifest = make_manifest({"kind": "box_table", "table": "annotations.jsonl", "image": "image",
                              "image_root": "images", "label": "finding",
                              "box": {"list": "bbox", "order": ["x1", "y1", "x2", "y2"]}},
                             labels={"nodule": "nodule", "effusion": "pleural effusion"}, tasks=["object_detection"])

    samples, exclusions = read_samples(manifest, raw)

    got = {s.source_path: [(r.label, r.instance, r.box) for r in s.regions] for s in samples}
    assert got == {
        "images/a.png": [("nodule", "object-1", (10.0, 20.0, 40.0, 60.0)),
                         ("effusion", "object-2", (150.0, 10.0, 170.0, 30.0))],
        "images/b.png": [("effusion", "object-1", (100.0, 50.0, 190.0, 99.0))]}
    assert [(e.item, e.reason.split(" (")[0]) for e in exclusions] == [
        ("annotations.jsonl:4", "line 4 is not a JSON record")]


def test_json_lines_take_no_records_path():
    with pytest.raises(ValidationError, match="every line is one record"):
        make_manifest({"kind": "box_table", "table": "a.jsonl", "records": "items", "image": "image",
                       "fixed_label": "x", "box": {"list": "bbox", "order": ["x1", "y1", "x2", "y2"]}},
                      labels={"x": "x"}, tasks=["object_detection"])
