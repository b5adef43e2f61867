"""folder_per_class with levels above the class folders: split folders and a split filter.

The tree is Kermany et al.'s OCT2017 (Mendeley doi:10.17632/rscbjbr9sj) as its loaders read it:
`CellData/OCT/{train,test}/{CNV,DME,DRUSEN,NORMAL}/<CLASS>-<patient>-<n>.jpeg`
(dataset-ninja/zhang-lab-data-oct@1989233a03d2d147a464acbd7e4cad271d7aa8dd:src/convert.py).
"""
from __future__ import annotations

import numpy as np
import pytest
from PIL import Image
from pydantic import ValidationError
from support.build_manifests import make_manifest

from mmbu.build.layouts import read_samples

OCT_LABELS = {"CNV": "choroidal neovascularisation", "DME": "diabetic macular oedema", "DRUSEN": "drusen",
              "NORMAL": "normal retina"}


def write_jpeg(path, value):
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.full((12, 16), value, np.uint8)).save(path, format="JPEG", quality=95)


def kermany_tree(raw):
    files = {
        "CellData/OCT/train/CNV/CNV-1016042-1.jpeg": 40, "CellData/OCT/train/DME/DME-1072015-1.jpeg": 80,
        "CellData/OCT/train/NORMAL/NORMAL-1001666-1.jpeg": 120, "CellData/OCT/test/CNV/CNV-103044-1.jpeg": 160,
        "CellData/OCT/test/DRUSEN/DRUSEN-1083159-1.jpeg": 200,
    }
    for name, value in files.items():
        write_jpeg(raw / name, value)
    # what a zip made on macOS also holds: AppleDouble copies and Finder files are never samples
    write_jpeg(raw / "__MACOSX/CellData/OCT/train/CNV/._CNV-1016042-1.jpeg", 0)
    (raw / "CellData/OCT/train/CNV/.DS_Store").write_bytes(b"\0\0\0\1Bud1")
    return files


def test_split_folders_above_class_folders_with_a_split_filter(tmp_path):
    raw = tmp_path / "raw"
    files = kermany_tree(raw)
    layout = {"kind": "folder_per_class", "root": "CellData/OCT", "folders": "{split}/{label}", "images": "*.jpeg",
              "splits": ["test"]}
    samples, exclusions = read_samples(make_manifest(layout, labels=OCT_LABELS), raw)

    assert [(s.source_path, s.label) for s in samples] == [
        ("CellData/OCT/test/CNV/CNV-103044-1.jpeg", "CNV"), ("CellData/OCT/test/DRUSEN/DRUSEN-1083159-1.jpeg", "DRUSEN")]
    assert exclusions == []
    for sample in samples:
        pixels = np.asarray(Image.open(sample.image_path))
        assert sample.image_size == (16, 12) and abs(int(pixels.mean()) - files[sample.source_path]) <= 1

    every, _ = read_samples(make_manifest({**layout, "splits": None}, labels=OCT_LABELS), raw)
    assert len(every) == 5 and not any("__MACOSX" in s.source_path for s in every)
    # the same file keeps its id whatever the filter: ids come from the path, not from the listing
    assert {s.sample_id for s in samples} <= {s.sample_id for s in every}


def test_a_split_that_is_not_there_is_reported_with_the_closest_name(tmp_path):
    raw = tmp_path / "raw"
    kermany_tree(raw)
    layout = {"kind": "folder_per_class", "root": "CellData/OCT", "folders": "{split}/{label}", "images": "*.jpeg",
              "splits": ["tests", "train"]}
    samples, exclusions = read_samples(make_manifest(layout, labels=OCT_LABELS), raw)
    assert len(samples) == 3
    assert [e.reason for e in exclusions] == ["split 'tests' is not among the split folders; did you mean 'test'?"]


def test_class_folders_nested_deeper_under_a_wildcard_level(tmp_path):
    raw = tmp_path / "raw"
    kermany_tree(raw)
    layout = {"kind": "folder_per_class", "root": "CellData", "folders": "*/train/{label}", "images": "*.jpeg"}
    samples, _ = read_samples(make_manifest(layout, labels=OCT_LABELS), raw)
    assert [s.label for s in samples] == ["CNV", "DME", "NORMAL"]


@pytest.mark.parametrize("layout, message", [
    ({"folders": "{split}/*"}, "must contain {label}"),
    ({"folders": "{label}", "splits": ["train"]}, "has none"),
    ({"folders": "{split}/{label"}, "unbalanced brace"),
    ({"folders": "{1split}/{label}"}, "is not a part name"),
])
def test_folder_templates_are_checked_when_the_manifest_is_read(layout, message):
    with pytest.raises(ValidationError, match=message):
        make_manifest({"kind": "folder_per_class", **layout}, labels=OCT_LABELS)


# Kaggle's CT Medical Images (kmader/siim-medical-images) keeps no class folders: the contrast tag is in each
# file's name, `dicom_dir/ID_0087_AGE_0044_CONTRAST_0_CT.dcm`
# (danielphil/kaggle_ctmi@1526a788da827bcd4a657fb5d54f402f2f503491:shaip_creation/populate_shaip_directories.py).
# Synthetic DICOM slices written by pydicom.
CT_FILES = {
    "dicom_dir/ID_0000_AGE_0060_CONTRAST_1_CT.dcm": "1",
    "dicom_dir/ID_0051_AGE_0067_CONTRAST_0_CT.dcm": "0",
    "dicom_dir/ID_0087_AGE_0044_CONTRAST_0_CT.dcm": "0",
    "dicom_dir/ID_0099_AGE_0070_CONTRAST_1_CT.dcm": "1",
}


def ct_tree(raw):
    from support.catalogue_replica import write_dicom

    for number, name in enumerate(CT_FILES):
        path = raw / name
        path.parent.mkdir(parents=True, exist_ok=True)
        write_dicom(path, np.full((16, 16), 100 * number, np.int16))
    write_dicom(raw / "dicom_dir" / "ID_0100_AGE_0050_CONTRAST_2_CT.dcm", np.zeros((16, 16), np.int16))
    (raw / "dicom_dir" / "readme.txt").write_text("not an image")
    (raw / "tiff_images").mkdir()


@pytest.mark.parametrize("where", [
    {"folders": "dicom_dir", "images": "ID_{id:d}_AGE_{age:d}_CONTRAST_{label}_CT.dcm"},
    {"root": "dicom_dir", "images": "*_CONTRAST_{label}_CT.dcm"},       # the files in root itself
])
def test_the_label_is_a_part_of_each_file_name(tmp_path, where):
    raw = tmp_path / "raw"
    ct_tree(raw)
    manifest = make_manifest({"kind": "folder_per_class", **where},
                             labels={"0": "no contrast agent", "1": "contrast agent"})

    samples, exclusions = read_samples(manifest, raw)

    assert sorted((s.source_path, s.label) for s in samples) == sorted(CT_FILES.items())
    # a tag the labels do not name is an exclusion like an unknown class folder; the text file never matches
    assert [e.item for e in exclusions] == ["dicom_dir/ID_0100_AGE_0050_CONTRAST_2_CT.dcm"]
    assert "'2' is not in the manifest's label vocabulary" in exclusions[0].reason


def test_a_folder_of_images_that_is_not_there_is_one_exclusion(tmp_path):
    raw = tmp_path / "raw"
    ct_tree(raw)
    manifest = make_manifest({"kind": "folder_per_class", "folders": "dicom", "images": "*_CONTRAST_{label}_CT.dcm"},
                             labels={"0": "no contrast agent", "1": "contrast agent"})
    samples, exclusions = read_samples(manifest, raw)
    assert samples == []
    assert [e.reason for e in exclusions] == [
        "folder_per_class expects the folder of the images matching 'dicom' under '.'; found none"]


@pytest.mark.parametrize(("layout", "message"), [
    ({"folders": "{label}", "images": "*_{label}.dcm"}, "the label is named twice"),
    ({"folders": "dicom_dir", "images": "*.dcm"}, "must contain {label}"),
    ({"images": "*_{label.dcm"}, "unbalanced brace"),
])
def test_the_label_is_named_exactly_once(layout, message):
    with pytest.raises(ValidationError, match=message):
        make_manifest({"kind": "folder_per_class", **layout})
