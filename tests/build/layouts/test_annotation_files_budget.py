"""Annotation files a layout reads whole (issue 32, points 3 and 9): the XML readers (VOC, Aperio, CVAT) obey the
same `MMBU_MAX_BYTES` "annotation file" budget as the JSON ones, and a FIFO named like an annotation file is one
sentence instead of a build blocked for ever. Every file here is synthetic, written by the test."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest
import tifffile
from support.build_manifests import make_manifest, write_png

from mmbu.build.layouts import read_samples

from tests.build.layouts.test_polygons import MONUSEG, MONUSEG_LAYOUT, TASKS, aperio_xml, monuseg

LABELS = {"rbc": "red blood cell"}
PADDING = "<!-- " + "x" * 65536 + " -->"  # a comment: well-formed XML whose size, not content, is over the budget


def voc_xml(name: str, padding: str = "") -> str:
    return (f"<annotation>{padding}<filename>{name}</filename><size><width>50</width><height>40</height></size>"
            "<object><name>rbc</name><bndbox><xmin>1</xmin><ymin>1</ymin><xmax>10</xmax><ymax>20</ymax></bndbox>"
            "</object></annotation>")


def cvat_xml(padding: str = "") -> str:
    return ('<?xml version="1.0" encoding="utf-8"?>\n<annotations><version>1.1</version>' + padding +
            '<image id="0" name="a.png" width="40" height="30">'
            '<box label="polyp" xtl="20.0" ytl="10.0" xbr="30.0" ybr="20.0" z_order="0"/></image></annotations>')


CVAT_LAYOUT = {"kind": "polygons", "format": "cvat_xml", "annotations": "annotations.xml", "image_root": "images"}


def voc_dataset(raw):
    for name in ("a", "big"):
        write_png(raw / "JPEGImages" / f"{name}.png", size=(50, 40))
    (raw / "Annotations").mkdir()
    (raw / "Annotations" / "a.xml").write_text(voc_xml("a.png"))
    return make_manifest({"kind": "voc", "annotations": "Annotations/*.xml", "image_root": "JPEGImages"},
                         labels=LABELS, tasks=["object_detection"])


def test_a_voc_file_over_the_byte_budget_is_one_exclusion_and_the_others_read(tmp_path, monkeypatch):
    raw = tmp_path / "raw"
    manifest = voc_dataset(raw)
    big = raw / "Annotations" / "big.xml"
    big.write_text(voc_xml("big.png", PADDING))
    monkeypatch.setenv("MMBU_MAX_BYTES", "32768")

    samples, exclusions = read_samples(manifest, raw)

    assert [s.source_path for s in samples] == ["JPEGImages/a.png"]
    assert [e.item for e in exclusions] == ["Annotations/big.xml"]
    size = big.stat().st_size
    assert exclusions[0].reason == (f"{big} declares an annotation file: 64.2 KiB ({size:,} bytes), more than the "
                                    "32,768 bytes one item may cost (MMBU_MAX_BYTES); it is refused before it is read")


def test_an_aperio_file_over_the_byte_budget_is_one_exclusion_and_the_others_read(tmp_path, monkeypatch):
    raw = tmp_path / "raw"
    monuseg(raw)
    images, annotations = raw / MONUSEG / "Tissue Images", raw / MONUSEG / "Annotations"
    tifffile.imwrite(images / "big.tif", np.full((60, 80, 3), 180, np.uint8), photometric="rgb")
    square = [(40, 20), (60, 20), (60, 40), (40, 40)]
    (annotations / "big.xml").write_text(aperio_xml([square]).replace("<Regions>", f"{PADDING}<Regions>"))
    monkeypatch.setenv("MMBU_MAX_BYTES", "32768")

    samples, exclusions = read_samples(make_manifest(MONUSEG_LAYOUT, labels={"nucleus": "cell nucleus"}, tasks=TASKS),
                                       raw, tmp_path / "cache")

    assert [s.source_path for s in samples] == [f"{MONUSEG}/Tissue Images/TCGA-18-5592-01Z-00-DX1.tif"]
    refused = [e for e in exclusions if e.item == f"{MONUSEG}/Annotations/big.xml"]
    assert len(refused) == 1 and "declares an annotation file" in refused[0].reason
    assert f"({(annotations / 'big.xml').stat().st_size:,} bytes)" in refused[0].reason
    assert "(MMBU_MAX_BYTES); it is refused before it is read" in refused[0].reason


def test_a_cvat_file_over_the_byte_budget_is_one_sentence_and_the_build_goes_on(tmp_path, monkeypatch):
    raw = tmp_path / "raw"
    write_png(raw / "images" / "a.png", size=(40, 30))
    (raw / "annotations.xml").write_text(cvat_xml(PADDING))
    manifest = make_manifest(CVAT_LAYOUT, labels={"polyp": "polyp"}, tasks=TASKS)
    assert [s.source_path for s in read_samples(manifest, raw, tmp_path / "cache")[0]] == ["images/a.png"]
    monkeypatch.setenv("MMBU_MAX_BYTES", "32768")

    samples, exclusions = read_samples(manifest, raw, tmp_path / "cache")

    assert samples == [] and [e.item for e in exclusions] == ["annotations.xml"]
    assert "declares an annotation file" in exclusions[0].reason and "MMBU_MAX_BYTES" in exclusions[0].reason


@pytest.mark.timeout(20)  # a blocking open of the FIFO would wait for a writer for ever: fail, never hang
def test_a_fifo_named_like_a_coco_file_is_one_sentence_without_blocking(tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    os.mkfifo(raw / "ann.json")
    manifest = make_manifest({"kind": "coco", "annotations": "ann.json"}, labels=LABELS, tasks=["object_detection"])

    samples, exclusions = read_samples(manifest, raw)

    assert samples == [] and [e.item for e in exclusions] == ["ann.json"]
    assert exclusions[0].reason == (f"{raw / 'ann.json'} is not a regular file (a FIFO); it is not read "
                                    "(a FIFO, socket or device could block or never end)")


@pytest.mark.timeout(20)
def test_a_fifo_named_like_a_cvat_file_is_one_sentence_without_blocking(tmp_path):
    raw = tmp_path / "raw"
    write_png(raw / "images" / "a.png", size=(40, 30))
    os.mkfifo(raw / "annotations.xml")

    samples, exclusions = read_samples(make_manifest(CVAT_LAYOUT, labels={"polyp": "polyp"}, tasks=TASKS), raw,
                                       tmp_path / "cache")

    assert samples == [] and [e.item for e in exclusions] == ["annotations.xml"]
    assert "is not a regular file (a FIFO); it is not read" in exclusions[0].reason


@pytest.mark.timeout(20)
def test_a_fifo_among_voc_files_is_one_sentence_and_the_others_read(tmp_path):
    """The annotation glob once passed over a FIFO in silence (its image vanished unexplained); now it is named."""
    raw = tmp_path / "raw"
    manifest = voc_dataset(raw)
    os.mkfifo(raw / "Annotations" / "big.xml")

    samples, exclusions = read_samples(manifest, raw)

    assert [s.source_path for s in samples] == ["JPEGImages/a.png"]
    assert [e.item for e in exclusions] == ["Annotations/big.xml"]
    assert "big.xml is not a regular file (a FIFO); it is not read" in exclusions[0].reason


def test_the_json_readers_share_the_regular_file_check(tmp_path):
    """A box table, a GeoJSON and a LabelMe file go through the same `read_json_bytes` as COCO."""
    from mmbu.core import budget

    (tmp_path / "ok.json").write_text(json.dumps({"images": []}))
    assert budget.read_json_bytes(tmp_path / "ok.json") == b'{"images": []}'
    with pytest.raises(budget.OverBudget, match=r"/dev/null is not a regular file \(a character device\)"):
        budget.read_json_bytes("/dev/null")
    with pytest.raises(budget.OverBudget, match="is not a regular file"):
        budget.read_annotation_bytes("/dev/zero")
