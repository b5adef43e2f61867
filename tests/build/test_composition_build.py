"""Composition profiles through the whole build, on synthetic datasets written by Pillow (a folder-per-class dataset
with train/test folders and a rare label, an image/mask dataset with many nuclei per field): the rows a profile
takes, that only their images are converted, byte-identical rows across builds and `--jobs`, per-profile release
folders and the refusal to replace another profile's release, and what the card and build_info.json state."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from click.testing import CliRunner
from PIL import Image
from support.build_repo import BLOOD, config_for, write_manifest, write_nuclei_manifest

from mmbu.build.pipeline import ReleaseProfileMismatch, run_build
from mmbu.cli import cli

# lym: 20 training + 5 test images; neu: 2 (a rare label); mon: 12 test images
CELLS = {("train", "lym"): 20, ("test", "lym"): 5, ("train", "neu"): 2, ("test", "mon"): 12}
FIELDS, NUCLEI_PER_FIELD = 6, 6
COMPOSITION = {
    "version": 7, "seed": 3, "default_profile": "paper", "test_splits": ["test"],
    "profiles": {
        "paper": {"description": "Test caps.", "min_rows_per_label": 0, "objects_per_image": 1,
                  "rows_per_dataset": {"ungrounded_classification": 9, "box_grounded_classification": 8,
                                       "mask_grounded_classification": 5, "object_detection": 3}},
        "full": {"description": "Every row."},
        "mini": {"description": "Fewer.", "rows_per_dataset": {
            "ungrounded_classification": 3, "box_grounded_classification": 2, "mask_grounded_classification": 2,
            "object_detection": 1}},
    },
}


def make_repo(root: Path) -> Path:
    """The two datasets and a composition file; returns the composition file's path."""
    manifests = root / "manifests" / "datasets"
    manifests.mkdir(parents=True)
    rng = np.random.default_rng(28)
    for (split, label), count in CELLS.items():
        folder = root / "src" / "cells" / split / label
        folder.mkdir(parents=True)
        for index in range(count):
            Image.fromarray(rng.integers(0, 255, (24, 28, 3), dtype=np.uint8)).save(folder / f"{label}{index}.png")
    write_manifest(manifests, "cells", source={"kind": "local", "path": "src/cells"},
                   tasks=["ungrounded_classification"], layout={"kind": "folder_per_class", "folders": "{split}/{label}"},
                   metadata=BLOOD, labels={"lym": "lymphocyte", "neu": "neutrophil", "mon": "monocyte"},
                   questions={"options_name": "blood cell type", "n_options": 3})
    for folder in ("images", "masks"):
        (root / "src" / "nuclei" / folder).mkdir(parents=True)
    for field in range(FIELDS):
        image = np.full((60, 96), 20, np.uint8)
        mask = np.zeros((60, 96), np.uint8)
        for k in range(NUCLEI_PER_FIELD):  # separate squares at a place that differs per field
            y, x = 4 + 9 * k, 4 + 12 * ((k + field) % 6)
            mask[y:y + 6, x:x + 8] = 1 if k % 3 else 2
        image[mask > 0] = 200
        Image.fromarray(image).save(root / "src" / "nuclei" / "images" / f"field{field}.png")
        Image.fromarray(mask).save(root / "src" / "nuclei" / "masks" / f"field{field}.png")
    write_nuclei_manifest(manifests)
    path = root / "composition.yaml"
    path.write_text(yaml.safe_dump(COMPOSITION, sort_keys=False), encoding="utf-8")
    return path


def rows(release: Path, task: str) -> pd.DataFrame:
    return pd.concat([pd.read_parquet(p) for p in sorted((release / "data" / task).glob("*.parquet"))],
                     ignore_index=True)


def sums(release: Path) -> dict[str, str]:
    """SHA256SUMS of the data shards, the card and the exclusions (build_info.json and croissant.json hold the time)."""
    lines = (release / "SHA256SUMS").read_text(encoding="utf-8").splitlines()
    return {name: digest for digest, name in (line.split("  ", 1) for line in lines)
            if name.startswith("data/") or name in ("README.md", "exclusions.csv")}


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    root = tmp_path_factory.mktemp("composition")
    composition = make_repo(root)
    report = run_build(config_for(root, composition_path=composition, duplicate_distance=None))
    assert report.exit_code == 0, report.failed
    return root, composition, report


def test_paper_takes_the_capped_rows_keeps_the_rare_label_and_prefers_the_test_split(repo):
    root, _, report = repo
    release = root / "data" / "release"
    assert report.release_rows == {"ungrounded_classification": 9, "box_grounded_classification": 8,
                                   "mask_grounded_classification": 5, "object_detection": 3}
    cells = rows(release, "ungrounded_classification")
    by_label = cells.groupby("answer")["source_path"].apply(sorted).to_dict()
    assert len(by_label["neutrophil"]) == 2  # the rare label keeps both its images
    assert len(by_label["lymphocyte"]) == 4 and all(p.startswith("test/") for p in by_label["lymphocyte"])
    assert len(by_label["monocyte"]) == 3
    boxes = rows(release, "box_grounded_classification")
    # 4 nuclei and 4 mitotic figures, one of each label per field in the first round (all six fields hold both)
    assert boxes.groupby(["source_path", "answer"]).size().max() == 1 and len(boxes) == 8
    outcome = {o.dataset_id: o for o in report.datasets}
    assert outcome["cells"].selection["ungrounded_classification"] == {
        "available": 39, "chosen": 9, "test_split": 7,
        "labels": {"lym": [25, 4], "mon": [12, 3], "neu": [2, 2]}}


def test_only_the_chosen_images_are_converted(repo):
    root, _, _ = repo
    work = root / "data" / "work"
    converted = {path.stem for path in (work / "cells" / "images").glob("*.png")}
    assert converted == set(rows(root / "data" / "release", "ungrounded_classification")["sample_id"])
    assert len(converted) == 9 < sum(CELLS.values())
    fields = list((work / "nuclei" / "images").glob("*.png"))
    asked = {path for task in ("box_grounded_classification", "mask_grounded_classification", "object_detection")
             for path in rows(root / "data" / "release", task)["source_path"]}
    assert len(fields) == len(asked) == 4 < FIELDS  # the fields that come first in the seed's order, for every task
    assert len(json.loads((work / "cells" / "state.json").read_text())["convert"]["outputs"]) == 3 + 9


def test_card_and_build_info_state_the_profile_version_and_seed(repo):
    root, composition, _ = repo
    release = root / "data" / "release"
    info = json.loads((release / "build_info.json").read_text(encoding="utf-8"))
    assert info["composition"]["profile"] == "paper" and info["composition"]["version"] == 7
    assert info["composition"]["seed"] == 3 and info["seeds"] == {"questions": 0, "composition": 3}
    import hashlib
    assert info["composition"]["sha256"] == hashlib.sha256(composition.read_bytes()).hexdigest()
    card = (release / "README.md").read_text(encoding="utf-8")
    section = card[card.index("## Composition"):].split("\n## ")[0]
    assert "`paper` profile of composition version 7 (seed 3; `composition.yaml`" in section
    assert info["composition"]["sha256"] in section and "Test caps." in section


def test_rows_are_byte_identical_across_builds_and_jobs(repo, tmp_path):
    root, composition, _ = repo
    again = tmp_path / "again"
    shutil.copytree(root / "src", again / "src")
    shutil.copytree(root / "manifests", again / "manifests")
    report = run_build(config_for(again, composition_path=composition, duplicate_distance=None, jobs=2))
    assert report.exit_code == 0, report.failed
    assert sums(again / "data" / "release") == sums(root / "data" / "release")
    for dataset in ("cells", "nuclei"):
        for name in ("selection.json", "selected.jsonl"):
            first = (root / "data" / "work" / dataset / name).read_text(encoding="utf-8")
            second = (again / "data" / "work" / dataset / name).read_text(encoding="utf-8")
            assert first.replace(str(root), "") == second.replace(str(again), "")


def test_each_profile_has_its_own_release_folder_and_a_profile_switch_converts_nothing_twice(repo):
    root, composition, _ = repo
    made = {p: p.stat().st_mtime_ns for p in (root / "data" / "work").glob("*/images/*.png")}
    mini = run_build(config_for(root, composition_path=composition, duplicate_distance=None, profile="mini"))
    assert mini.exit_code == 0 and mini.release_dir == root / "data" / "release-mini"
    assert mini.release_rows == {"ungrounded_classification": 3, "box_grounded_classification": 2,
                                 "mask_grounded_classification": 2, "object_detection": 1}
    assert all("layout" not in o.ran for o in mini.datasets)  # the fetched files and the layout are shared
    assert json.loads((root / "data" / "release" / "build_info.json").read_text())["composition"]["profile"] == "paper"
    full = run_build(config_for(root, composition_path=composition, duplicate_distance=None, profile="full"))
    assert full.release_rows["ungrounded_classification"] == sum(CELLS.values())
    assert full.release_rows["box_grounded_classification"] == FIELDS * NUCLEI_PER_FIELD
    assert all(o.selection == {} for o in full.datasets)  # `full` has no select step
    again = run_build(config_for(root, composition_path=composition, duplicate_distance=None))
    assert not again.release_written and all("convert" in o.ran for o in again.datasets)  # selected.jsonl again
    assert all(path.stat().st_mtime_ns == made[path] for path in made)  # every PNG made once, then reused


def build_command(root: Path, composition: Path, *extra: str) -> list[str]:
    return ["build", "--manifests", str(root / "manifests" / "datasets"), "--data", str(root / "data"),
            "--composition", str(composition), "--keep-duplicates", *extra]


def test_a_release_of_another_profile_in_the_folder_is_refused_with_one_sentence(repo, tmp_path, monkeypatch):
    root, composition, _ = repo
    monkeypatch.chdir(root)  # local sources are resolved from the repository holding the manifests
    data = root / "data"
    shutil.move(data / "release", tmp_path / "paper-release")
    shutil.copytree(data / "release-mini", data / "release")
    try:
        result = CliRunner().invoke(cli, build_command(root, composition))
        assert result.exit_code == 2, result.output
        assert "Traceback" not in result.output and len(result.output.strip().splitlines()) == 1
        assert "holds a release of the `mini` profile, which this `paper` build would replace" in result.output
        assert f"move it to {data / 'release-mini'}" in " ".join(result.output.split())

        info = json.loads((data / "release" / "build_info.json").read_text())
        del info["composition"]  # as a release built before profiles
        (data / "release" / "build_info.json").write_text(json.dumps(info))
        with pytest.raises(ReleaseProfileMismatch, match="built before composition profiles"):
            run_build(config_for(root, composition_path=composition))
    finally:
        shutil.rmtree(data / "release")
        shutil.move(tmp_path / "paper-release", data / "release")


def test_an_unknown_profile_or_a_broken_composition_file_is_one_sentence(repo, tmp_path, monkeypatch):
    root, composition, _ = repo
    monkeypatch.chdir(root)
    result = CliRunner().invoke(cli, build_command(root, composition, "--profile", "huge"))
    assert result.exit_code == 2 and "--profile huge: not a profile of the composition file" in result.output
    broken = tmp_path / "broken.yaml"
    broken.write_text(yaml.safe_dump({**COMPOSITION, "default_profile": "nowhere"}), encoding="utf-8")
    result = CliRunner().invoke(cli, build_command(root, broken))
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert f"{broken}: field (top level): Value error, default_profile 'nowhere' is not one of" in result.output
