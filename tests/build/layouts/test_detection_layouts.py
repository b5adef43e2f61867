"""COCO (and COCO-like files with corner boxes), YOLO and Pascal VOC: boxes in source pixels (pixel edges, x2/y2
exclusive) and bad objects dropped."""
from __future__ import annotations

import json

import numpy as np
import pytest
import tifffile
from pydantic import ValidationError
from support.build_manifests import make_manifest, write_png

from mmbu.build.layouts import read_samples

LABELS = {"rbc": "red blood cell", "ring": "ring-stage parasite"}


def test_coco_annotations_become_xyxy_regions_and_bad_annotations_are_excluded(tmp_path):
    raw = tmp_path / "raw"
    write_png(raw / "img" / "a.png", size=(100, 80))
    write_png(raw / "img" / "b.png", size=(100, 80))
    (raw / "ann.json").write_text(json.dumps({
        "images": [{"id": 1, "file_name": "a.png", "width": 100, "height": 80},
                   {"id": 2, "file_name": "b.png", "width": 100, "height": 80},
                   {"id": 3, "file_name": "missing.png", "width": 100, "height": 80},
                   {"id": 4, "width": 100, "height": 80}],
        "categories": [{"id": 1, "name": "rbc"}, {"id": 2, "name": "ring"}, {"id": 3, "name": "wbc"}],
        "annotations": [
            {"id": 10, "image_id": 1, "category_id": 1, "bbox": [10, 20, 30, 15]},
            {"id": 11, "image_id": 1, "category_id": 2, "bbox": [90, 70, 20, 20]},  # clipped at the border
            {"id": 12, "image_id": 1, "category_id": 3, "bbox": [0, 0, 5, 5]},  # label not in the manifest
            {"id": 13, "image_id": 2, "category_id": 1, "bbox": [200, 200, 5, 5]},  # outside the image
            {"id": 14, "image_id": 3, "category_id": 1, "bbox": [0, 0, 5, 5]},
            {"id": 15, "image_id": 9, "category_id": 1, "bbox": [0, 0, 5, 5]},
        ]}), encoding="utf-8")
    manifest = make_manifest({"kind": "coco", "annotations": "ann.json", "image_root": "img"},
                             labels=LABELS, tasks=["object_detection"])

    samples, exclusions = read_samples(manifest, raw)

    assert [s.source_path for s in samples] == ["img/a.png"]
    assert [(r.label, r.instance, r.box) for r in samples[0].regions] == [
        ("rbc", "ann-10", (10.0, 20.0, 40.0, 35.0)), ("ring", "ann-11", (90.0, 70.0, 100.0, 80.0))]
    reasons = " | ".join(f"{e.item}: {e.reason}" for e in exclusions)
    assert "ann-12: object label 'wbc' is not in the manifest" in reasons
    assert "ann-13: box [200.0, 200.0, 205.0, 205.0] lies outside the 100x80 image" in reasons
    assert "img/b.png: no annotated object with a known label" in reasons
    assert "img/missing.png: the labels point to img/missing.png, which is not in the fetched files" in reasons
    assert "ann-15: annotation refers to image id 9" in reasons
    assert "ann.json#image-4: image entry without a file_name" in reasons
    # grounded rows get their own stable id, different from the image's
    assert samples[0].region_id(samples[0].regions[0]) != samples[0].sample_id


def test_yolo_normalised_boxes_are_placed_in_source_pixels(tmp_path):
    raw = tmp_path / "raw"
    write_png(raw / "images" / "train" / "a.png", size=(200, 100))
    write_png(raw / "images" / "train" / "b.png", size=(200, 100))
    (raw / "labels" / "train").mkdir(parents=True)
    (raw / "labels" / "train" / "a.txt").write_text("0 0.5 0.5 0.2 0.4\n1 0.1 0.1 0.1 0.1\n7 0.5 0.5 0.1 0.1\nbad\n")
    (raw / "labels" / "train" / "orphan.txt").write_text("0 0.5 0.5 0.1 0.1\n")
    manifest = make_manifest({"kind": "yolo", "images": "images/**/*.png", "labels": "labels",
                              "class_names": ["rbc", "ring"]}, labels=LABELS, tasks=["object_detection"])

    samples, exclusions = read_samples(manifest, raw)

    assert [s.source_path for s in samples] == ["images/train/a.png"]
    boxes = [r.box for r in samples[0].regions]
    assert boxes[0] == pytest.approx((80.0, 30.0, 120.0, 70.0))
    assert boxes[1] == pytest.approx((10.0, 5.0, 30.0, 15.0))
    reasons = {e.item: e.reason for e in exclusions}
    assert "class index 7 is outside class_names" in reasons["labels/train/a.txt:3"]
    assert "is not '<class> <cx> <cy> <w> <h>'" in reasons["labels/train/a.txt:4"]
    assert reasons["images/train/b.png"].startswith("no YOLO label file labels/train/b.txt")
    assert reasons["labels/train/orphan.txt"] == "YOLO labels without a matching image"


def test_yolo_segmentation_polygon_lines_give_the_box_of_their_vertices(tmp_path):
    # Ultralytics' instance-segmentation labels: '<class> x1 y1 x2 y2 x3 y3 ...', normalised (AlphaDent ships these);
    # read as '<class> <cx> <cy> <w> <h>' the first four numbers would give a wrong box without a word.
    raw = tmp_path / "raw"
    write_png(raw / "images" / "a.png", size=(200, 100))
    (raw / "labels").mkdir(parents=True)
    (raw / "labels" / "a.txt").write_text(
        "0 0.1 0.2 0.4 0.2 0.3 0.6\n"            # triangle: x 20..80, y 20..60
        "1 0.5 0.5 0.6 0.5 0.6 0.9 0.5 0.9\n"    # square: x 100..120, y 50..90
        "0 0.5 0.5 0.2 0.4 0.9\n"                # five numbers (a box and a confidence): not a label
        "0 0.1 0.1 0.2 0.2 0.3\n")               # an odd number of coordinates
    manifest = make_manifest({"kind": "yolo", "images": "images/*.png", "labels": "labels",
                              "class_names": ["rbc", "ring"]}, labels=LABELS, tasks=["object_detection"])

    samples, exclusions = read_samples(manifest, raw)

    assert [(r.label, r.instance) for r in samples[0].regions] == [("rbc", "line-1"), ("ring", "line-2")]
    assert samples[0].regions[0].box == pytest.approx((20.0, 20.0, 80.0, 60.0))
    assert samples[0].regions[1].box == pytest.approx((100.0, 50.0, 120.0, 90.0))
    reasons = {e.item: e.reason for e in exclusions}
    for line in (3, 4):
        assert "is not '<class> <cx> <cy> <w> <h>' nor a polygon" in reasons[f"labels/a.txt:{line}"]


@pytest.mark.parametrize("lines, boxes, excluded", [
    # a pose line with two keypoints has nine numbers after its class: read as 'auto' it would be a 4-vertex polygon
    ("pose", [(20.0, 20.0, 60.0, 60.0)], [2, 3]),  # in a pose file a line without keypoints is malformed
    ("auto", [(30.0, 25.0, 160.0, 50.0), (40.0, 10.0, 140.0, 90.0)], [3]),
    ("boxes", [(40.0, 10.0, 140.0, 90.0)], [1, 3]),
    ("polygons", [(30.0, 25.0, 160.0, 50.0)], [2, 3]),
])
def test_yolo_lines_are_read_as_the_layout_says(tmp_path, lines, boxes, excluded):
    raw = tmp_path / "raw"
    write_png(raw / "images" / "a.png", size=(200, 100))
    (raw / "labels").mkdir(parents=True)
    (raw / "labels" / "a.txt").write_text(
        "0 0.2 0.4 0.2 0.4 0.15 0.25 0.8 0.5\n"   # pose: box x 20..60, y 20..60; keypoints (30, 25), (160, 50)
        "1 0.45 0.5 0.5 0.8\n"                     # a box: x 40..140, y 10..90
        "0 0.5 0.5 0.2\n")                         # three numbers: nothing
    manifest = make_manifest({"kind": "yolo", "images": "images/*.png", "labels": "labels", "lines": lines,
                              "class_names": ["rbc", "ring"]}, labels=LABELS, tasks=["object_detection"])

    samples, exclusions = read_samples(manifest, raw)

    assert [r.box for r in samples[0].regions] == [pytest.approx(box) for box in boxes]
    assert sorted(int(e.item.rsplit(":", 1)[1]) for e in exclusions) == excluded


def test_a_voc_size_that_is_not_the_images_excludes_the_image_with_both_sizes(tmp_path):
    raw = tmp_path / "raw"
    write_png(raw / "JPEGImages" / "a.png", size=(50, 40))
    write_png(raw / "JPEGImages" / "b.png", size=(100, 80))   # resized after it was annotated at 50 x 40
    (raw / "Annotations").mkdir()
    for stem in ("a", "b"):
        (raw / "Annotations" / f"{stem}.xml").write_text(
            f"<annotation><filename>{stem}.png</filename><size><width>50</width><height>40</height></size>"
            "<object><name>rbc</name><bndbox><xmin>1</xmin><ymin>1</ymin><xmax>10</xmax><ymax>20</ymax></bndbox>"
            "</object></annotation>")
    manifest = make_manifest({"kind": "voc", "annotations": "Annotations/*.xml", "image_root": "JPEGImages"},
                             labels=LABELS, tasks=["object_detection"])

    samples, exclusions = read_samples(manifest, raw)

    assert [s.source_path for s in samples] == ["JPEGImages/a.png"]
    assert samples[0].regions[0].box == pytest.approx((0.0, 0.0, 10.0, 20.0))
    assert [(e.item, e.reason) for e in exclusions] == [(
        "JPEGImages/b.png", "its VOC file Annotations/b.xml gives the image size 50 x 40 but the image is 100 x 80, "
                            "so its boxes cannot be placed")]


def test_voc_boxes_convert_from_one_based_inclusive_pixels(tmp_path):
    raw = tmp_path / "raw"
    write_png(raw / "JPEGImages" / "a.png", size=(50, 40))
    (raw / "Annotations").mkdir()
    (raw / "Annotations" / "a.xml").write_text(
        "<annotation><filename>a.png</filename><size><width>50</width><height>40</height><depth>3</depth></size>"
        "<object><name>rbc</name><bndbox><xmin>1</xmin><ymin>1</ymin><xmax>10</xmax><ymax>20</ymax></bndbox></object>"
        "<object><name>ring</name><bndbox><xmin>5</xmin></bndbox></object>"
        "</annotation>")
    (raw / "Annotations" / "broken.xml").write_text("<annotation><filename>")
    manifest = make_manifest({"kind": "voc", "annotations": "Annotations/*.xml", "image_root": "JPEGImages"},
                             labels=LABELS, tasks=["object_detection"])

    samples, exclusions = read_samples(manifest, raw)

    assert [(r.label, r.box) for r in samples[0].regions] == [("rbc", (0.0, 0.0, 10.0, 20.0))]
    reasons = {e.item: e.reason for e in exclusions}
    assert reasons["Annotations/a.xml#object-2"] == "object without a name or a complete bndbox"
    assert reasons["Annotations/broken.xml"].startswith("not a VOC annotation")


def voc_xml(objects: str, filename: str = "elsewhere/renamed.jpg", size: tuple[int, int] = (60, 40)) -> str:
    return (f"<annotation><filename>{filename}</filename><size><width>{size[0]}</width><height>{size[1]}</height>"
            f"<depth>3</depth></size>{objects}</annotation>")


def box(name: str, x1: int, y1: int, x2: int, y2: int) -> str:
    return (f"<object><name>{name}</name><bndbox><xmin>{x1}</xmin><ymin>{y1}</ymin><xmax>{x2}</xmax><ymax>{y2}</ymax>"
            "</bndbox></object>")


def test_voc_pairs_xml_files_with_images_by_template_and_ignores_their_filename(tmp_path):
    """LabelImg saves <stem>.xml beside <stem>.jpg in folders no listing names, at any depth, and its <filename> may
    name another file (a renamed image): with `images` the pair is the template's, never <filename>. An XML
    without <size> takes the image's, so the box past the right edge of old.jpg is clipped as any other."""
    raw = tmp_path / "raw"
    write_png(raw / "phone" / "set1" / "a.jpg", size=(60, 40))
    (raw / "phone" / "set1" / "a.xml").write_text(voc_xml(box("rbc", 1, 1, 10, 20) + box("ring", 21, 11, 40, 30)))
    write_png(raw / "set2" / "a.jpg", size=(60, 40))     # the same stem in another folder is another image
    (raw / "set2" / "a.xml").write_text(voc_xml(box("ring", 31, 1, 60, 40), filename="a.jpg"))
    (raw / "set2" / "lost.xml").write_text(voc_xml(box("rbc", 1, 1, 5, 5)))
    write_png(raw / "set2" / "unlabelled.jpg", size=(60, 40))
    # an older tool's XML: no <size> (the image's is read) and the class in <label> rather than <name>
    write_png(raw / "set2" / "old.jpg", size=(60, 40))
    (raw / "set2" / "old.xml").write_text(
        "<annotation><object><label>rbc</label><bndbox><xmin>41</xmin><ymin>1</ymin><xmax>70</xmax><ymax>10</ymax>"
        "</bndbox></object></annotation>")
    manifest = make_manifest({"kind": "voc", "annotations": "**/{folder}/{stem}.xml",
                              "images": "**/{folder}/{stem}.jpg"}, labels=LABELS, tasks=["object_detection"])

    samples, exclusions = read_samples(manifest, raw)

    assert {s.source_path: [(r.label, r.box) for r in s.regions] for s in samples} == {
        "phone/set1/a.jpg": [("rbc", (0.0, 0.0, 10.0, 20.0)), ("ring", (20.0, 10.0, 40.0, 30.0))],
        "set2/a.jpg": [("ring", (30.0, 0.0, 60.0, 40.0))],
        "set2/old.jpg": [("rbc", (40.0, 0.0, 60.0, 10.0))]}
    assert sorted((e.item, e.reason) for e in exclusions) == [
        ("set2/lost.xml", "annotation without a matching image"),
        ("set2/unlabelled.jpg", "no annotation file matching '**/{folder}/{stem}.xml' for this image")]


@pytest.mark.parametrize("layout, message", [
    ({"annotations": "x/{stem}.xml", "images": "y/{stem}.jpg", "image_root": "y"}, "leave out image_root"),
    ({"annotations": "x/{stem}.xml", "images": "y/{name}.jpg"}, "shares no named part"),
])
def test_voc_images_template_is_checked(layout, message):
    with pytest.raises(ValidationError, match=message):
        make_manifest({"kind": "voc", **layout}, labels=LABELS, tasks=["object_detection"])


def midog_2021(raw):
    """MIDOG 2021's training set: `MIDOG.json` beside `001.tiff` ... `200.tiff`, a COCO-like file whose `bbox` holds
    the corners `[x1, y1, x2, y2]` (50x50 boxes around each cell) with categories 1 `mitotic figure` and 2
    `not mitotic figure` (DeepMicroscopy/MIDOG@e632ed4295be94685de6b95b090f537675bf1026:databases/MIDOG.json, read in
    full; baseline/utils/slide_helper.py pairs `file_name` with the images in one folder). Written with json and
    tifffile at a small size."""
    raw.mkdir(parents=True)
    for name in ("001.tiff", "002.tiff"):
        tifffile.imwrite(raw / name, np.full((120, 160, 3), 200, np.uint8))
    document = {
        "info": {"description": "MItosis Domain Generalization Challenge (MIDOG) 2021 - Training set"},
        "licenses": [{"url": "http://creativecommons.org/licenses/by-nc-nd/2.0/", "id": 1,
                      "name": "Attribution-NonCommercial-NoDerivs License"}],
        "images": [{"license": 1, "file_name": "001.tiff", "id": 1, "width": 160, "height": 120},
                   {"license": 1, "file_name": "002.tiff", "id": 2, "width": 160, "height": 120}],
        "categories": [{"id": 1, "name": "mitotic figure"}, {"id": 2, "name": "not mitotic figure"}],
        "annotations": [{"bbox": [100, 30, 150, 80], "category_id": 1, "image_id": 1, "id": 1},
                        {"bbox": [10, 20, 60, 70], "category_id": 2, "image_id": 1, "id": 2},
                        {"bbox": [140, 90, 190, 140], "category_id": 1, "image_id": 1, "id": 3},  # clipped
                        {"bbox": [60, 20, 10, 70], "category_id": 1, "image_id": 2, "id": 4},  # corners swapped
                        {"bbox": [60, 20, 10], "category_id": 1, "image_id": 2, "id": 5}]}
    (raw / "MIDOG.json").write_text(json.dumps(document), encoding="utf-8")


def test_coco_like_corner_boxes_are_read_with_bbox_order(tmp_path):
    raw = tmp_path / "raw"
    midog_2021(raw)
    labels = {"mitotic figure": "mitotic figure", "not mitotic figure": "cell that only resembles a mitotic figure"}
    manifest = make_manifest({"kind": "coco", "annotations": "MIDOG.json", "bbox_order": ["x1", "y1", "x2", "y2"]},
                             labels=labels, tasks=["object_detection"])

    samples, exclusions = read_samples(manifest, raw)

    assert [s.source_path for s in samples] == ["001.tiff"]
    assert [(r.label, r.instance, r.box) for r in samples[0].regions] == [
        ("mitotic figure", "ann-1", (100.0, 30.0, 150.0, 80.0)),
        ("not mitotic figure", "ann-2", (10.0, 20.0, 60.0, 70.0)),
        ("mitotic figure", "ann-3", (140.0, 90.0, 160.0, 120.0))]
    reasons = {e.item: e.reason for e in exclusions}
    assert reasons["002.tiff#ann-4"] == "box [60.0, 20.0, 10.0, 70.0] has no area"
    assert reasons["002.tiff#ann-5"] == "bbox [60, 20, 10] is not four numbers [x1, y1, x2, y2]"
    # read as COCO's default [x, y, width, height], the same file gives other (wrong) boxes: the option matters
    default, _ = read_samples(make_manifest({"kind": "coco", "annotations": "MIDOG.json"}, labels=labels,
                                            tasks=["object_detection"]), raw)
    assert default[0].regions[1].box == (10.0, 20.0, 70.0, 90.0)


@pytest.mark.parametrize("order, message", [
    (["x1", "y1", "x2", "x2"], "do not pin a box down"),
    (["x1", "y1", "w", "h"], "do not pin a box down"),
    (["x1", "y1", "x2"], r"roles \[.x1., .y1., .x2.\] do not pin a box down; name \[x1, y1, x2, y2\] or"),
])
def test_coco_bbox_order_is_checked(order, message):
    with pytest.raises(ValidationError, match=message):
        make_manifest({"kind": "coco", "annotations": "a.json", "bbox_order": order}, labels=LABELS,
                      tasks=["object_detection"])


def test_coco_annotations_without_bbox_take_the_box_of_their_polygons(tmp_path):
    # exporters that write only `segmentation` (polygons of [x1, y1, x2, y2, ...], one object possibly in two parts)
    raw = tmp_path / "raw"
    write_png(raw / "img" / "a.png", size=(100, 80))
    (raw / "ann.json").write_text(json.dumps({
        "images": [{"id": 1, "file_name": "a.png", "width": 100, "height": 80}],
        "categories": [{"id": 1, "name": "rbc"}, {"id": 2, "name": "ring"}],
        "annotations": [
            {"id": 1, "image_id": 1, "category_id": 1, "segmentation": [[12, 30, 40, 22, 35, 50]]},
            {"id": 2, "image_id": 1, "category_id": 2, "bbox": [],
             "segmentation": [[60, 10, 70, 10, 70, 20], [80, 15, 85.5, 40, 75, 30]]},  # two parts, one object
            {"id": 3, "image_id": 1, "category_id": 1, "bbox": [1, 2, 3, 4],
             "segmentation": [[50, 50, 60, 50, 60, 60]]},  # a shipped bbox wins over the polygon
            {"id": 4, "image_id": 1, "category_id": 1, "segmentation": {"counts": "abc", "size": [80, 100]}},
            {"id": 5, "image_id": 1, "category_id": 1, "segmentation": [[1, 2, 3, 4]]},
            {"id": 6, "image_id": 1, "category_id": 1},
        ]}), encoding="utf-8")
    manifest = make_manifest({"kind": "coco", "annotations": "ann.json", "image_root": "img"},
                             labels=LABELS, tasks=["object_detection"])

    samples, exclusions = read_samples(manifest, raw)

    assert [(r.label, r.instance, r.box) for r in samples[0].regions] == [
        ("rbc", "ann-1", (12.0, 22.0, 40.0, 50.0)),
        ("ring", "ann-2", (60.0, 10.0, 85.5, 40.0)),
        ("rbc", "ann-3", (1.0, 2.0, 4.0, 6.0))]
    reasons = {e.item: e.reason for e in exclusions}
    assert reasons == {
        "a.png#ann-4": "no bbox, and its segmentation is a run-length mask, which the coco layout does not decode",
        "a.png#ann-5": "no bbox, and its segmentation holds '[1, 2, 3, 4]', not a polygon of three or more [x, y] "
                       "vertices",
        "a.png#ann-6": "bbox None is not four numbers [x1, y1, width, height]"}


def test_yolo_labels_in_a_tree_of_their_own_pair_with_images_by_template(tmp_path):
    # GRAZPEDWRI-DX's figshare release: images_part1..4/<stem>.png and folder_structure/yolov5/labels/<stem>.txt,
    # two trees no mirroring folder relates; the templates' shared {stem} does.
    raw = tmp_path / "raw"
    write_png(raw / "images_part1" / "0001_a.png", size=(200, 100))
    write_png(raw / "images_part2" / "0002_b.png", size=(100, 100))
    write_png(raw / "images_part2" / "0003_c.png", size=(100, 100))
    labels = raw / "folder_structure" / "yolov5" / "labels"
    labels.mkdir(parents=True)
    (labels / "0001_a.txt").write_text("1 0.5 0.5 0.2 0.4\n")
    (labels / "0002_b.txt").write_text("0 0.25 0.75 0.5 0.5\n0 0.5 0.5 0.1 0.1 0.9\n")
    (labels / "0009_z.txt").write_text("0 0.5 0.5 0.1 0.1\n")
    manifest = make_manifest({"kind": "yolo", "images": "**/images_part*/{stem}.png",
                              "labels": "**/yolov5/labels/{stem}.txt", "class_names": ["rbc", "ring"]},
                             labels=LABELS, tasks=["object_detection"])

    samples, exclusions = read_samples(manifest, raw)

    assert [(s.source_path, [(r.label, r.box) for r in s.regions]) for s in samples] == [
        ("images_part1/0001_a.png", [("ring", pytest.approx((80.0, 30.0, 120.0, 70.0)))]),
        ("images_part2/0002_b.png", [("rbc", pytest.approx((0.0, 50.0, 50.0, 100.0)))])]
    reasons = {e.item: e.reason for e in exclusions}
    assert "nor a polygon" in reasons["folder_structure/yolov5/labels/0002_b.txt:2"]
    assert reasons["folder_structure/yolov5/labels/0009_z.txt"] == "annotation without a matching image"
    assert reasons["images_part2/0003_c.png"].startswith("no annotation file matching")


def test_a_yolo_labels_template_must_share_a_named_part_with_images():
    with pytest.raises(ValidationError, match="shares no named part"):
        make_manifest({"kind": "yolo", "images": "**/*.png", "labels": "labels/{stem}.txt"},
                      labels=LABELS, tasks=["object_detection"])
