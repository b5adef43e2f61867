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


def _tree_with_every_kind_of_path(tmp_path):
    """A dataset folder (itself reached through a link) holding plain files, links that stay inside, links
    that leave (file, folder, through `..`), a dangling link, a link loop and a missing name."""
    real = tmp_path / "real-raw"
    write_png(real / "MON" / "a.png")
    write_png(real / "LYM" / "b.png")
    outside = write_png(tmp_path / "outside" / "private.png")
    raw = tmp_path / "raw"
    raw.symlink_to(real, target_is_directory=True)
    (real / "MON" / "inside-link.png").symlink_to(real / "LYM" / "b.png")
    (real / "MON" / "relative-inside.png").symlink_to("../LYM/b.png")
    (real / "MON" / "out.png").symlink_to(outside)
    (real / "MON" / "out-relative.png").symlink_to("../../outside/private.png")
    (real / "out-folder").symlink_to(tmp_path / "outside", target_is_directory=True)
    (real / "MON" / "dangling.png").symlink_to(real / "gone.png")
    (real / "loop-a").symlink_to(real / "loop-b")
    (real / "loop-b").symlink_to(real / "loop-a")
    names = ["MON/a.png", "LYM/b.png", "MON/inside-link.png", "MON/relative-inside.png", "MON/out.png",
             "MON/out-relative.png", "out-folder/private.png", "MON/dangling.png", "loop-a", "loop-a/x.png",
             "MON/missing.png", "missing-folder/x.png", "MON/../LYM/b.png", "MON/../../outside/private.png",
             "out-folder/../MON/a.png", "MON/./a.png", ".", "MON"]
    return raw, names


def test_a_resolved_folder_answers_exactly_as_resolving_each_path_whole(tmp_path, monkeypatch):
    from pathlib import Path

    from mmbu.core.confinement import ResolvedFolder, inside

    raw, names = _tree_with_every_kind_of_path(tmp_path)
    monkeypatch.chdir(tmp_path)
    for folder in (raw, Path("raw")):  # an absolute and a relative dataset folder, both through a link
        resolved = ResolvedFolder(folder)
        for name in names:
            for path in (folder / name, f"{folder}/{name}"):
                assert resolved.inside(path) == inside(folder, Path(path)), path
                try:
                    expected = Path(path).resolve().relative_to(Path(folder).resolve()).as_posix()
                except (ValueError, RuntimeError) as exc:
                    with pytest.raises(type(exc)):
                        resolved.relative(path)
                else:
                    assert resolved.relative(path) == expected, path
    resolved = ResolvedFolder(raw)
    assert resolved.inside(raw / "MON" / "inside-link.png") and not resolved.inside(raw / "MON" / "out.png")
    assert not resolved.inside(raw / "loop-a") and not resolved.inside(raw / "MON" / "../../outside/private.png")


def test_a_link_made_out_after_its_folder_was_seen_is_still_refused(tmp_path):
    """The cache holds resolved folders only: a file's own last component is looked at on every call."""
    from mmbu.core.confinement import ResolvedFolder

    outside = write_png(tmp_path / "outside" / "private.png")
    raw = tmp_path / "raw"
    write_png(raw / "MON" / "a.png")
    resolved = ResolvedFolder(raw)
    assert resolved.inside(raw / "MON" / "a.png")
    (raw / "MON" / "a.png").unlink()
    (raw / "MON" / "a.png").symlink_to(outside)
    assert not resolved.inside(raw / "MON" / "a.png")


def test_every_escape_through_links_is_excluded_by_the_layout(tmp_path):
    raw, _ = _tree_with_every_kind_of_path(tmp_path)
    samples, exclusions = read_samples(make_manifest({"kind": "folder_per_class", "images": "*.png"}), raw)
    assert sorted(s.source_path for s in samples) == ["LYM/b.png", "MON/a.png"]  # the links inside repeat LYM/b.png
    reasons = {e.item: e.reason for e in exclusions}
    assert reasons["MON/out.png"] == reasons["MON/out-relative.png"] == "the labels point outside the dataset's folder"
    assert "MON/dangling.png" not in reasons  # a dangling link is no file: the glob leaves it out
