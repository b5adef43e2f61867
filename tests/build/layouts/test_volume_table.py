"""volume_table: one DICOM series (or NIfTI file) per table row, one sample at the slice the manifest picks."""
from __future__ import annotations

import nibabel as nib
import numpy as np
import pytest
from pydantic import ValidationError
from pydicom.uid import generate_uid
from support.build_manifests import make_manifest, write_dicom

from mmbu.build.layouts import read_samples

LABELS = {"0": "no methylation", "1": "methylation"}


def rsna_miccai(raw, cases=("00000", "00003")):
    """RSNA-MICCAI brain tumour radiogenomic classification (Kaggle): `train_labels.csv` with `BraTS21ID,MGMT_value`
    and `train/<BraTS21ID, 5 digits>/FLAIR/Image-<n>.dcm` (also T1w, T1wCE, T2w) - the competition's data page as
    quoted in public notebooks' READMEs. The slices' file numbers run against their positions here, so only the
    ImagePositionPatient order picks the right middle slice."""
    for case in cases:
        uid = generate_uid()
        for number, z in zip((1, 2, 3, 4, 5), (40.0, 30.0, 20.0, 10.0, 0.0)):
            write_dicom(raw / "train" / case / "FLAIR" / f"Image-{number}.dcm", rows=8, columns=8, Modality="MR",
                        SeriesInstanceUID=uid, InstanceNumber=number, ImagePositionPatient=[0.0, 0.0, z],
                        ImageOrientationPatient=[1.0, 0.0, 0.0, 0.0, 1.0, 0.0])
    (raw / "train_labels.csv").write_text("BraTS21ID,MGMT_value\n0,1\n3,0\n109,1\n", encoding="utf-8")


LAYOUT = {"kind": "volume_table", "table": "train_labels.csv", "volume": "train/{BraTS21ID:0>5}/FLAIR",
          "label_column": "MGMT_value"}


def test_a_series_folder_per_row_is_one_sample_at_its_middle_slice(tmp_path):
    raw = tmp_path / "raw"
    rsna_miccai(raw)
    samples, exclusions = read_samples(make_manifest(LAYOUT, labels=LABELS), raw)

    assert [(s.source_path, s.label, s.image_path.name) for s in samples] == [
        ("train/00000/FLAIR", "1", "Image-3.dcm"), ("train/00003/FLAIR", "0", "Image-3.dcm")]
    assert sorted(p.name for p in samples[0].companion_paths) == ["Image-1.dcm", "Image-2.dcm", "Image-4.dcm", "Image-5.dcm"]
    assert samples[0].provenance["series"] == ("5 slices ordered by ImagePositionPatient along the slice normal; "
                                               "slice 2 (Image-3.dcm) converted")
    assert samples[0].image_size == (8, 8) and samples[0].file_metadata["dicom.Modality"] == "MR"
    assert [(e.item, e.reason) for e in exclusions] == [
        ("train/00109/FLAIR", "the labels point to train/00109/FLAIR, which is not in the fetched files")]


def test_an_index_slice_is_counted_along_the_normal_not_by_file_name(tmp_path):
    raw = tmp_path / "raw"
    rsna_miccai(raw, cases=("00000",))
    samples, _ = read_samples(make_manifest(LAYOUT, labels=LABELS, convert={"slice": 0}), raw)
    assert samples[0].image_path.name == "Image-5.dcm"  # z = 0, the first along the normal


def test_series_found_by_uid_and_folders_with_two_series(tmp_path):
    raw = tmp_path / "raw"
    rsna_miccai(raw, cases=("00000",))
    other = generate_uid()
    write_dicom(raw / "train" / "00000" / "FLAIR" / "Image-9.dcm", rows=8, columns=8, SeriesInstanceUID=other,
                InstanceNumber=1)
    samples, exclusions = read_samples(make_manifest(LAYOUT, labels=LABELS), raw)
    assert samples == [] and exclusions[0].reason == ("the folder holds 2 DICOM series; name one by its "
                                                      "SeriesInstanceUID (layout.series_column)")
    (raw / "series.csv").write_text(f"uid,label\n{other},1\n1.2.3.4,0\n", encoding="utf-8")
    by_uid = {"kind": "volume_table", "table": "series.csv", "series_column": "uid", "label_column": "label",
              "volumes_root": "train"}
    samples, exclusions = read_samples(make_manifest(by_uid, labels=LABELS), raw)
    assert [(s.source_path, s.image_path.name) for s in samples] == [(f"series={other}", "Image-9.dcm")]
    assert exclusions[0].reason == "no DICOM file under 'train' belongs to series '1.2.3.4'"


def test_nifti_files_named_by_the_table(tmp_path):
    raw = tmp_path / "raw"
    (raw / "volumes").mkdir(parents=True)
    nib.save(nib.Nifti1Image(np.zeros((6, 5, 4), np.float32), np.eye(4)), raw / "volumes" / "study_0001.nii.gz")
    (raw / "labels.csv").write_text("study,class\nstudy_0001,1\n", encoding="utf-8")
    layout = {"kind": "volume_table", "table": "labels.csv", "volume": "volumes/{study}.nii.gz", "label_column": "class"}
    samples, _ = read_samples(make_manifest(layout, labels=LABELS), raw)
    assert [(s.source_path, s.part, s.image_size) for s in samples] == [
        ("volumes/study_0001.nii.gz", "slice=middle;axis=2", (6, 5))]


@pytest.mark.parametrize("layout, message", [
    ({"volume": "train/{id}", "series_column": "uid"}, "exactly one of volume"),
    ({"volume": "train/all"}, "names no column"),
    ({"volume": "train/{id"}, "is not a format string"),
])
def test_volume_table_fields_are_checked(layout, message):
    with pytest.raises(ValidationError, match=message):
        make_manifest({"kind": "volume_table", "table": "t.csv", "label_column": "l", **layout}, labels=LABELS)
