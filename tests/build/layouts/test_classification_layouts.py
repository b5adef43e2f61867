"""Folder-per-class and label-table layouts: samples, stable ids and exclusions for bad items."""
from __future__ import annotations

from support.build_manifests import make_manifest, write_png

from mmbu.build.layouts import read_samples


def test_folder_per_class_reads_every_class_folder_and_excludes_unknown_labels(tmp_path):
    raw = tmp_path / "raw"
    write_png(raw / "imgs" / "MON" / "a.png")
    write_png(raw / "imgs" / "MON" / "b.png")
    write_png(raw / "imgs" / "PMY" / "c.png")
    write_png(raw / "imgs" / "XYZ" / "d.png")
    manifest = make_manifest({"kind": "folder_per_class", "root": "imgs", "images": "*.png"})

    samples, exclusions = read_samples(manifest, raw)

    assert [(s.source_path, s.label) for s in samples] == [
        ("imgs/MON/a.png", "MON"), ("imgs/MON/b.png", "MON"), ("imgs/PMY/c.png", "PMY")]
    assert samples[0].image_size == (32, 24)
    assert [(e.item, e.stage) for e in exclusions] == [("imgs/XYZ/d.png", "layout")]
    assert "'XYZ' is not in the manifest's label vocabulary" in exclusions[0].reason


def test_sample_ids_do_not_depend_on_order_or_neighbours(tmp_path):
    raw = tmp_path / "raw"
    write_png(raw / "MON" / "a.png")
    manifest = make_manifest({"kind": "folder_per_class"})
    first, _ = read_samples(manifest, raw)
    write_png(raw / "MON" / "0_new_first.png")  # sorts before a.png
    second, _ = read_samples(manifest, raw)

    ids_first = {s.source_path: s.sample_id for s in first}
    ids_second = {s.source_path: s.sample_id for s in second}
    assert ids_second["MON/a.png"] == ids_first["MON/a.png"]
    assert ids_first["MON/a.png"].startswith("demo_marrow-")
    assert len(set(ids_second.values())) == 2


def test_folder_layout_that_does_not_match_the_files_is_one_exclusion(tmp_path):
    raw = tmp_path / "raw"
    write_png(raw / "flat.png")
    samples, exclusions = read_samples(make_manifest({"kind": "folder_per_class", "root": "missing"}), raw)
    assert samples == []
    assert len(exclusions) == 1 and "one folder per class under 'missing'" in exclusions[0].reason


def test_label_table_rows_metadata_columns_and_missing_images(tmp_path):
    raw = tmp_path / "raw"
    write_png(raw / "images" / "x1.png")
    write_png(raw / "images" / "x2.png")
    write_png(raw / "images" / "x3.png")
    (raw / "labels.tsv").write_text(
        "file\tclass\tsite\n"
        "x1\tMON\tSite A\n"
        "x2\tEBO\t\n"
        "gone\tMON\tSite B\n"
        "x3\tnope\tSite C\n"
        "x1\tMON\tSite A\n"
        "../../outside\tMON\t\n", encoding="utf-8")
    manifest = make_manifest({"kind": "label_table", "table": "labels.tsv", "image_column": "file",
                              "label_column": "class", "image_root": "images", "image_suffix": ".png",
                              "metadata_columns": {"institution": "site"}})

    samples, exclusions = read_samples(manifest, raw)

    assert [(s.source_path, s.label, s.row_metadata) for s in samples] == [
        ("images/x1.png", "MON", {"institution": "Site A"}), ("images/x2.png", "EBO", {})]
    reasons = {e.item: e.reason for e in exclusions}
    assert "not in the fetched files" in reasons["images/gone.png"]
    assert "'nope' is not in the manifest's label vocabulary" in reasons["images/x3.png"]
    assert sum("listed more than once" in e.reason for e in exclusions) == 1
    assert sum(e.reason == "the labels point outside the dataset's folder" for e in exclusions) == 1


def test_label_table_with_a_wrong_column_names_the_column(tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "labels.csv").write_text("image,label\na.png,MON\n", encoding="utf-8")
    manifest = make_manifest({"kind": "label_table", "table": "labels.csv", "image_column": "file",
                              "label_column": "label"})
    samples, exclusions = read_samples(manifest, raw)
    assert samples == []
    assert exclusions[0].reason == "the table has no column 'file' (found: 'image', 'label')" and exclusions[0].item == "labels.csv"


def test_unfetched_dataset_is_an_exclusion_not_an_error(tmp_path):
    samples, exclusions = read_samples(make_manifest({"kind": "folder_per_class"}), tmp_path / "absent")
    assert samples == [] and "has not been fetched" in exclusions[0].reason
