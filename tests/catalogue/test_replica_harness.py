"""The replica writers themselves: each file kind is written by the field's own writer and reads back as specified."""
from __future__ import annotations

import json

import nibabel
import numpy as np
import pyarrow.parquet as pq
import pydicom
import tifffile
import yaml
from PIL import Image
from support.catalogue_replica import build_replica, layout_shape, write_file

from mmbu.build.layouts import read_samples
from mmbu.curation.manifest import DatasetManifest


def test_images_and_masks_read_back_with_their_sizes_and_values(tmp_path):
    write_file(tmp_path, {"path": "a/img.jpg", "image": {"size": [40, 30]}})
    write_file(tmp_path, {"path": "a/grey16.tif", "image": {"size": [20, 10], "mode": "I;16"}})
    write_file(tmp_path, {"path": "a/mask.png", "mask": {"size": [40, 30], "regions": [
        {"value": 2, "box": [5, 6, 15, 16]}, {"value": 7, "box": [20, 0, 40, 4]}]}})
    write_file(tmp_path, {"path": "a/vol.nii.gz", "mask": {"size": [12, 8], "depth": 4,
                                                           "regions": [{"value": 1, "box": [1, 2, 3, 5]}]}})
    write_file(tmp_path, {"path": "a/x.dcm", "image": {"size": [16, 12], "mode": "L"}})

    assert Image.open(tmp_path / "a/img.jpg").size == (40, 30)
    grey = tifffile.imread(tmp_path / "a/grey16.tif")
    assert grey.shape == (10, 20) and grey.dtype == np.uint16 and grey.max() > 255
    mask = np.asarray(Image.open(tmp_path / "a/mask.png"))
    assert (mask == 2).sum() == 100 and mask[6, 5] == 2 and mask[16, 15] == 0 and (mask == 7).sum() == 80
    volume = np.asarray(nibabel.load(tmp_path / "a/vol.nii.gz").dataobj)
    assert volume.shape == (12, 8, 4) and volume[1:3, 2:5, :].all() and volume.sum() == 2 * 3 * 4
    dicom = pydicom.dcmread(tmp_path / "a/x.dcm")
    assert (dicom.Rows, dicom.Columns) == (12, 16) and dicom.pixel_array.max() > 0


def test_tables_arrays_and_parquet(tmp_path):
    write_file(tmp_path, {"path": "t.csv", "csv": {"rows": [["image", "label"], ["a.png", "x"]]}})
    write_file(tmp_path, {"path": "t.json", "json": {"objects": [{"category": "ring"}]}})
    write_file(tmp_path, {"path": "d.npz", "arrays": {"train_labels": {"shape": [3, 1], "values": [0, 2, 1]},
                                                      "train_images": {"shape": [3, 4, 4]}}})
    write_file(tmp_path, {"path": "p.parquet", "parquet": {"columns": {
        "image": {"images": [{"size": [8, 6]}, {"size": [5, 5]}]}, "label": [1, 0]}}})

    assert (tmp_path / "t.csv").read_text() == "image,label\na.png,x\n"
    assert json.loads((tmp_path / "t.json").read_text())["objects"][0]["category"] == "ring"
    arrays = np.load(tmp_path / "d.npz")
    assert arrays["train_labels"].ravel().tolist() == [0, 2, 1] and arrays["train_images"].shape == (3, 4, 4)
    table = pq.read_table(tmp_path / "p.parquet").to_pylist()
    assert [row["label"] for row in table] == [1, 0]
    assert Image.open(__import__("io").BytesIO(table[0]["image"]["bytes"])).size == (8, 6)


def test_an_excel_workbook_keeps_its_sheets_in_order_and_numbers_as_numbers(tmp_path):
    from openpyxl import load_workbook

    write_file(tmp_path, {"path": "c.xlsx", "xlsx": {"sheets": {"Notes": [["read me"]],
                                                                "OD": [["ID", "Diagnosis"], ["RET002OD", 1]]}}})
    workbook = load_workbook(tmp_path / "c.xlsx")
    assert workbook.sheetnames == ["Notes", "OD"]
    assert [[cell.value for cell in row] for row in workbook["OD"].iter_rows()] == [["ID", "Diagnosis"], ["RET002OD", 1]]
    assert workbook["OD"]["B2"].data_type == "n"


def test_a_spec_builds_a_tree_the_layout_reads(tmp_path):
    spec = yaml.safe_load("""
        files:
          - {path: data/images/case1.png, image: {size: [32, 32]}}
          - {path: data/masks/case1.png, mask: {size: [32, 32], regions: [{value: 1, box: [2, 2, 10, 12]},
                                                                          {value: 1, box: [20, 20, 30, 30]}]}}
    """)
    manifest = DatasetManifest.model_validate({
        "id": "harness", "title": "t", "source": {"kind": "local", "path": "x"}, "license": "CC0-1.0",
        "citation": "c", "tasks": ["mask_grounded_classification", "object_detection"],
        "layout": {"kind": "image_mask_pairs", "images": "data/images/*.png", "masks": "data/masks/*.png",
                   "mask_values": {1: "lesion"}, "instances": "components"},
        "metadata": {"image_source": "s", "dataset_name": "d", "domain": "radiology", "modality": "x-ray imaging",
                     "sub_modality": "digital radiography", "specimen": "human", "topic": "t",
                     "original_task": "o", "url": "https://a.example.org"},
        "labels": {"lesion": "lesion"}, "questions": {"options_name": "finding", "n_options": 2},
        "curation": {"round": 1, "reviewers": ["r"]}})
    raw = build_replica(spec, tmp_path / "raw")
    samples, exclusions = read_samples(manifest, raw)
    assert not exclusions and len(samples) == 1
    assert sorted(r.box for r in samples[0].regions) == [(2, 2, 10, 12), (20, 20, 30, 30)]
    assert layout_shape(manifest.layout) == "image_mask_pairs(images, instances, mask_values, masks)"
