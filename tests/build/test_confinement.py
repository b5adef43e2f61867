"""Manifest paths never leave the dataset's folder (issue 16, point 1): refused by `mmbu manifests validate`
from the text, and again by the build after symbolic links are resolved, so no file outside `raw/<id>/`
(or, for a local source, outside the repository) is read or lands in a release."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
import yaml
from support.build_manifests import make_manifest, write_png
from support.build_repo import BLOOD, CELL_CLASSES, config_for, make_repo, write_manifest

from mmbu.build.layouts import read_samples
from mmbu.build.pipeline import run_build
from mmbu.curation.manifest import DatasetManifest

SECRET = "patient_name,diagnosis\nJane Doe,confidential\n"

ESCAPES = [
    ("layout.table", {"kind": "label_table", "table": "../../../../outside/table.csv", "image_column": "file",
                      "label_column": "class"}),
    ("layout.annotations", {"kind": "coco", "annotations": "../annotations.json"}),
    ("layout.root", {"kind": "folder_per_class", "root": "/etc"}),
    ("layout.images", {"kind": "folder_per_class", "images": "../../*.png"}),
    ("layout.image_root", {"kind": "voc", "annotations": "*.xml", "image_root": "~/pictures"}),
    ("layout.masks.0", {"kind": "mask_files", "image": "{id}.png", "masks": ["..\\..\\{id}_mask.png"], "objects": "file",
                        "label": "MON"}),
]


@pytest.mark.parametrize("field, layout", ESCAPES, ids=[field for field, _ in ESCAPES])
def test_validate_refuses_a_layout_path_that_leaves_the_dataset_naming_the_field(tmp_path, field, layout):
    manifest = make_manifest({"kind": "folder_per_class"}).model_dump(mode="json", exclude_none=True)
    manifest["layout"] = layout
    path = tmp_path / f"{manifest['id']}.yaml"
    path.write_text(yaml.safe_dump(manifest))
    result = subprocess.run([sys.executable, "-m", "mmbu", "manifests", "validate", str(path)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    line = next(line for line in result.stderr.splitlines() if line.startswith(f"{path}: {field}:"))
    assert "is absolute" in line or "climbs out with '..'" in line


@pytest.mark.parametrize("where", ["../outside", "/etc", "src/../../outside"])
def test_validate_refuses_a_local_source_outside_the_repository(where):
    document = make_manifest({"kind": "folder_per_class"}).model_dump(mode="json", exclude_none=True)
    document["source"] = {"kind": "local", "path": where}
    with pytest.raises(ValueError, match=r"source\.local\.path|is absolute|climbs out"):
        DatasetManifest.model_validate(document)


def test_a_table_linked_out_of_the_dataset_is_not_read(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "table.csv").write_text(SECRET)
    raw = tmp_path / "raw"
    write_png(raw / "images" / "x1.png")
    (raw / "labels.csv").symlink_to(outside / "table.csv")  # passes the text check, not the resolved one
    layout = {"kind": "label_table", "table": "labels.csv", "image_column": "patient_name", "label_column": "diagnosis",
              "image_root": "images"}

    samples, exclusions = read_samples(make_manifest(layout), raw)

    assert samples == []
    assert len(exclusions) == 1 and "resolves outside" in exclusions[0].reason
    assert "Jane Doe" not in exclusions[0].reason and "confidential" not in exclusions[0].reason


def test_images_and_masks_linked_out_of_the_dataset_are_excluded(tmp_path):
    outside = write_png(tmp_path / "outside" / "private.png")
    raw = tmp_path / "raw"
    write_png(raw / "MON" / "a.png")
    (raw / "MON" / "b.png").symlink_to(outside)
    samples, exclusions = read_samples(make_manifest({"kind": "folder_per_class", "images": "*.png"}), raw)
    assert [s.source_path for s in samples] == ["MON/a.png"]
    assert [(e.item, e.reason) for e in exclusions] == [("MON/b.png", "the labels point outside the dataset's folder")]


def test_a_layout_that_bypassed_validation_is_still_confined_at_build_time(tmp_path):
    (tmp_path / "outside.csv").write_text(SECRET)
    raw = tmp_path / "ds" / "raw"
    write_png(raw / "images" / "x1.png")
    manifest = make_manifest({"kind": "label_table", "table": "labels.csv", "image_column": "patient_name",
                              "label_column": "diagnosis"})
    # as if the model had been built without validation (model_construct): the build checks on its own
    manifest.layout.__dict__["table"] = "../../outside.csv"
    samples, exclusions = read_samples(manifest, raw)
    assert samples == [] and "resolves outside" in exclusions[0].reason


def test_a_local_source_linked_out_of_the_repository_fails_that_dataset_only(tmp_path):
    make_repo(tmp_path)
    secret = tmp_path.parent / f"{tmp_path.name}-secrets"
    secret.mkdir()
    (secret / "lym").mkdir()
    (secret / "lym" / "id_rsa.png").write_bytes(b"-----BEGIN OPENSSH PRIVATE KEY-----\n")
    (tmp_path / "src" / "linked").symlink_to(secret)
    write_manifest(tmp_path / "manifests" / "datasets", "linked", source={"kind": "local", "path": "src/linked"},
                   tasks=["ungrounded_classification"], layout={"kind": "folder_per_class"}, metadata=BLOOD,
                   labels=CELL_CLASSES, questions={"options_name": "blood cell type", "n_options": 5})

    report = run_build(config_for(tmp_path))

    failures = [message for message in report.failed if message.startswith("linked:")]
    assert len(failures) == 1 and "outside the repository" in failures[0]
    assert "BEGIN OPENSSH" not in " ".join(report.failed)
    assert not (tmp_path / "data" / "raw" / "linked").exists()
    assert report.release_rows["ungrounded_classification"] == 8  # the other datasets built
    assert os.listdir(secret / "lym") == ["id_rsa.png"]
