"""arrays with items: file and `labels`: a class stored inside a per-sample `.npz`, beside (or with) the image.

The Harvard Ophthalmology AI Lab's FairVision release keeps, per patient, an SLO fundus photo `slo_<id>.jpg`
and a `data_<id>.npz` whose members hold the image arrays and the class: `glaucoma` (0/1), `amd_condition` and
`dr_subtype` (text), read by the authors' loader as `raw_data['glaucoma'].item()` and
`raw_data['amd_condition'].item()` (Harvard-Ophthalmology-AI-Lab/FairVision@eeae3e43c67f36c5e213807de73552d4958d6983:
src/data_handler.py; member names in its README.md). The fixtures are synthetic, written by numpy's own `np.savez`
and Pillow, small and with made-up ids.
"""
from __future__ import annotations

import numpy as np
import pytest
from PIL import Image
from pydantic import ValidationError
from support.build_manifests import make_manifest

from mmbu.build.layouts import read_samples

GLAUCOMA = {"0": "no glaucoma", "1": "glaucoma"}
AMD = {"no.amd.diagnosis": "no macular degeneration", "early.dry": "early dry macular degeneration"}


def patient(folder, pid: str, **members) -> np.ndarray:
    """One patient as FairVision ships it: `slo_<id>.jpg` and `data_<id>.npz` (0-d class members, an SLO array)."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(int(pid))
    slo = rng.integers(0, 256, (20, 26)).astype(np.uint8)
    Image.fromarray(slo).save(folder / f"slo_{pid}.jpg")
    np.savez(folder / f"data_{pid}.npz", slo_fundus=slo.T.astype(np.float32), race=np.array(1),
             **{name: np.array(value) for name, value in members.items()})
    return slo


def test_a_class_member_of_each_npz_labels_the_picture_beside_it(tmp_path):
    raw = tmp_path / "raw"
    patient(raw / "Glaucoma" / "Test", "08001", glaucoma=1.0)      # stored as a float, as the loader's float()
    patient(raw / "Glaucoma" / "Test", "08002", glaucoma=0)
    patient(raw / "Glaucoma" / "Training", "00007", glaucoma=1)
    layout = {"kind": "arrays", "items": "file",
              "images": "Glaucoma/{split}/slo_{pid}.jpg",
              "labels": {"file": "Glaucoma/{split}/data_{pid}.npz", "key": "glaucoma"},
              "splits": ["Test"]}
    samples, exclusions = read_samples(make_manifest(layout, labels=GLAUCOMA), raw, tmp_path / "cache")

    assert sorted((s.source_path, s.label) for s in samples) == [
        ("Glaucoma/Test/slo_08001.jpg", "1"), ("Glaucoma/Test/slo_08002.jpg", "0")]
    assert all(s.image_path.name.endswith(".jpg") and s.part is None for s in samples)  # the picture is the sample
    assert {s.provenance["labels"] for s in samples} == {"Glaucoma/Test/data_08001.npz:glaucoma",
                                                         "Glaucoma/Test/data_08002.npz:glaucoma"}
    assert exclusions == []


def test_a_text_member_is_the_raw_label_and_the_image_may_be_a_member_of_the_same_npz(tmp_path):
    raw = tmp_path / "raw"
    slo = patient(raw / "AMD" / "Test", "07001", amd_condition="early.dry")
    patient(raw / "AMD" / "Test", "07002", amd_condition="no.amd.diagnosis")
    layout = {"kind": "arrays", "items": "file", "axes": "HW",
              "images": {"file": "AMD/{split}/data_{pid}.npz", "key": "slo_fundus"},
              "labels": {"file": "AMD/{split}/data_{pid}.npz", "key": "amd_condition"}}
    samples, exclusions = read_samples(make_manifest(layout, labels=AMD), raw, tmp_path / "cache")

    by_source = {s.source_path: s for s in samples}
    assert {k: s.label for k, s in by_source.items()} == {"AMD/Test/data_07001.npz": "early.dry",
                                                          "AMD/Test/data_07002.npz": "no.amd.diagnosis"}
    first = by_source["AMD/Test/data_07001.npz"]
    assert first.part == "key=slo_fundus"
    assert np.array_equal(np.asarray(Image.open(first.image_path)), slo.T)  # the member as stored, losslessly
    assert exclusions == []


def test_bad_label_members_are_one_sentence_each_and_the_rest_builds(tmp_path):
    raw = tmp_path / "raw"
    folder = raw / "Glaucoma" / "Test"
    patient(folder, "00001", glaucoma=1)
    patient(folder, "00002", glaucom=1)                          # the member misspelt
    patient(folder, "00003", glaucoma=0.5)                       # not a class index
    patient(folder, "00004", glaucoma=3)                         # a value the manifest does not name
    patient(folder, "00005", glaucoma=1)
    (folder / "data_00005.npz").unlink()                          # the picture without its npz
    np.savez(folder / "data_00006.npz", glaucoma=np.array([{"x": 1}], dtype=object))  # needs pickle
    Image.fromarray(np.zeros((4, 4), np.uint8)).save(folder / "slo_00006.jpg")
    layout = {"kind": "arrays", "items": "file", "images": "Glaucoma/{split}/slo_{pid}.jpg",
              "labels": {"file": "Glaucoma/{split}/data_{pid}.npz", "key": "glaucoma"}}
    samples, exclusions = read_samples(make_manifest(layout, labels=GLAUCOMA), raw, tmp_path / "cache")

    assert [(s.source_path, s.label) for s in samples] == [("Glaucoma/Test/slo_00001.jpg", "1")]
    reasons = {e.item: e.reason for e in exclusions}
    assert reasons["Glaucoma/Test/data_00002.npz:glaucoma"] == (
        "Glaucoma/Test/data_00002.npz has no array 'glaucoma'; did you mean 'glaucom'?")
    assert reasons["Glaucoma/Test/data_00003.npz:glaucoma"] == "label value 0.5 is not a class index"
    assert reasons["Glaucoma/Test/slo_00004.jpg"] == "label '3' is not in the manifest's label vocabulary"
    assert reasons["Glaucoma/Test/data_00005.npz:glaucoma"] == (
        "Glaucoma/Test/data_00005.npz:glaucoma is not in the fetched files")
    assert reasons["Glaucoma/Test/data_00006.npz:glaucoma"].endswith(
        "holds Python objects, which only pickle can read; the build never unpickles downloaded files")
    assert len(exclusions) == 5


def test_class_names_name_the_indices_of_a_label_member(tmp_path):
    raw = tmp_path / "raw"
    patient(raw / "G" / "Test", "00001", glaucoma=1)
    layout = {"kind": "arrays", "items": "file", "images": "G/{split}/slo_{pid}.jpg",
              "labels": {"file": "G/{split}/data_{pid}.npz", "key": "glaucoma"},
              "class_names": ["non-glaucoma", "glaucoma"]}
    samples, _ = read_samples(make_manifest(layout, labels={"non-glaucoma": "no glaucoma", "glaucoma": "glaucoma"}),
                              raw, tmp_path / "cache")
    assert [s.label for s in samples] == ["glaucoma"]


@pytest.mark.parametrize("changes, message", [
    ({"metadata": {"race": {"file": "G/{split}/data_{pid}.npz", "key": "race"}}},
     "per-item metadata arrays belong to stacks"),
    ({"axes": "DHW"}, "a class per volume comes from volume_table"),
])
def test_per_file_label_fields_are_checked(changes, message):
    layout = {"kind": "arrays", "items": "file", "images": {"file": "G/{split}/data_{pid}.npz", "key": "slo_fundus"},
              "labels": {"file": "G/{split}/data_{pid}.npz", "key": "glaucoma"}, **changes}
    with pytest.raises(ValidationError, match=message):
        make_manifest(layout, labels=GLAUCOMA)
