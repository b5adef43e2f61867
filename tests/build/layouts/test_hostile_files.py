"""Files a layout must not trust: names that are not UTF-8 and things that are not regular files.

Each costs one exclusion with a sentence; the other samples of the dataset build.
"""
from __future__ import annotations

import os

from support.build_manifests import make_manifest, write_png

from mmbu.build.layouts import read_samples


def test_a_file_name_that_is_not_utf8_is_one_exclusion_and_the_rest_of_the_dataset_reads(tmp_path):
    raw = tmp_path / "raw"
    write_png(raw / "MON" / "a.png")
    write_png(raw / "MON" / os.fsdecode(b"b\xff\xfe.png"))
    write_png(raw / "MON" / "c.png")

    samples, exclusions = read_samples(make_manifest({"kind": "folder_per_class", "images": "*.png"}), raw)

    assert [s.source_path for s in samples] == ["MON/a.png", "MON/c.png"]
    assert [e.item for e in exclusions] == ["MON/b\\xff\\xfe.png"]
    assert "not valid UTF-8" in exclusions[0].reason
    exclusions[0].model_dump_json().encode("utf-8")  # printable everywhere: CSV, JSON, terminal


def test_a_fifo_named_like_an_image_never_blocks_a_label_table_layout(tmp_path):
    raw = tmp_path / "raw"
    write_png(raw / "images" / "x1.png")
    os.mkfifo(raw / "images" / "x2.png")
    (raw / "labels.csv").write_text("file,class\nx1.png,MON\nx2.png,MON\n")
    layout = {"kind": "label_table", "table": "labels.csv", "image_column": "file", "label_column": "class",
              "image_root": "images"}

    samples, exclusions = read_samples(make_manifest(layout), raw)

    assert [s.source_path for s in samples] == ["images/x1.png"]
    assert len(exclusions) == 1 and exclusions[0].item == "images/x2.png"
    assert "is a FIFO (named pipe), not a regular file" in exclusions[0].reason
