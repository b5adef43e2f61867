"""The whole build on small datasets written by Pillow: release contents, failure isolation, no-op
rebuild, resume after a lost image, and the Dask executor on a local cluster."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from PIL import Image

from support.build_repo import (
    BLOOD, CELL_CLASSES, NUCLEI, config_for, make_repo, write_manifest, write_rows_step_datasets,
)

from mmbu.build import pipeline, steps
from mmbu.build.questions import load_prototypes
from mmbu.build.pipeline import BuildConfig, run_build
from mmbu.build.release import verify_sha256sums

@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("repo")
    make_repo(root)
    report = run_build(config_for(root, jobs=2))
    return root, report


def test_release_holds_every_task_with_the_contract_columns(built, tmp_path):
    from datasets import load_dataset

    root, report = built
    assert report.exit_code == 0, report.failed
    release = root / "data" / "release"
    assert report.release_rows == {"box_grounded_classification": 4, "mask_grounded_classification": 4,
                                   "object_detection": 4, "ungrounded_classification": 8}
    for config, rows in report.release_rows.items():
        # datasets caches local configs by folder and config name: a fresh cache_dir avoids stale rows
        dataset = load_dataset(str(release), config, split="test", cache_dir=str(tmp_path))
        assert len(dataset) == rows
        row = dataset[0]
        for column in ("sample_id", "dataset_id", "image", "boxes", "mask", "target", "answer", "options",
                       "question_no_context", "question_modality", "question_full_context", "modality",
                       "sub_modality", "specimen", "license"):
            assert column in dataset.column_names
        assert row["answer"] in row["options"]
        assert row["image"].size in {(48, 40), (80, 64)}
    assert not verify_sha256sums(release)


def test_mask_rows_ship_the_region_and_its_box(built, tmp_path):
    from datasets import load_dataset

    root, _ = built
    masks = load_dataset(str(root / "data" / "release"), "mask_grounded_classification", split="test",
                         cache_dir=str(tmp_path))
    for row in masks:
        region = np.asarray(row["mask"]) > 0
        ys, xs = np.nonzero(region)
        # the box is the region's pixel-edge bounding box in the PNG frame
        assert row["boxes"] == [[xs.min(), ys.min(), xs.max() + 1, ys.max() + 1]]
        image = np.asarray(row["image"].convert("L"))
        assert (image[region] == 200).all()  # the mask lies on the bright object of its own image


def test_second_build_is_a_no_op(built):
    root, _ = built
    release = root / "data" / "release"
    before = (release / "SHA256SUMS").stat().st_mtime_ns
    report = run_build(config_for(root))
    assert report.exit_code == 0
    assert not report.release_written
    assert all(outcome.ran == [] for outcome in report.datasets)
    assert (release / "SHA256SUMS").stat().st_mtime_ns == before


def test_a_lost_image_is_made_again_and_only_it(tmp_path):
    make_repo(tmp_path)
    run_build(config_for(tmp_path))
    images = sorted((tmp_path / "data" / "work" / "cells" / "images").glob("*.png"))
    kept = {p: p.stat().st_mtime_ns for p in images[1:]}
    images[0].unlink()
    report = run_build(config_for(tmp_path))
    assert report.exit_code == 0
    assert images[0].exists()
    assert {p: p.stat().st_mtime_ns for p in images[1:]} == kept
    assert "convert" in next(o for o in report.datasets if o.dataset_id == "cells").ran


def test_bad_datasets_are_reported_and_the_rest_is_built(tmp_path):
    make_repo(tmp_path, broken=True)
    report = run_build(config_for(tmp_path))
    assert report.exit_code == 1
    assert any(message.startswith("missing") for message in report.failed)
    stray = next(o for o in report.datasets if o.dataset_id == "stray")
    reasons = " ".join(e["reason"] for e in stray.exclusions)
    assert "unknown" in reasons
    assert report.release_rows["ungrounded_classification"] == 8 + 1  # the stray dataset's valid image stays
    exclusions = (tmp_path / "data" / "release" / "exclusions.csv").read_text(encoding="utf-8")
    assert "missing" in exclusions and "stray" in exclusions


def test_round_three_checks_are_written_for_the_review_stage(tmp_path):
    from mmbu.curation.review.checks import load_build_results

    make_repo(tmp_path, broken=True)
    run_build(config_for(tmp_path))
    results, problems = load_build_results(tmp_path / "data" / "review-checks.jsonl")
    assert problems == []
    assert all(outcome.ok for outcome in results["cells"].values())
    assert set(results["cells"]) == {"fetches", "files-open", "labels-complete"}
    assert not results["missing"]["fetches"].ok and not results["missing"]["files-open"].ok
    assert results["stray"]["fetches"].ok and not results["stray"]["labels-complete"].ok
    assert "unknown" in results["stray"]["labels-complete"].detail


def test_mmbu_build_command_exit_codes(tmp_path):
    make_repo(tmp_path, broken=True)
    env = {**os.environ, "MMBU_DATA": str(tmp_path / "data")}
    command = [sys.executable, "-m", "mmbu", "build", "--manifests", "manifests/datasets"]
    result = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    document = json.loads((tmp_path / "data" / "build-report.json").read_text(encoding="utf-8"))
    assert document["release_rows"]["box_grounded_classification"] == 4
    usage = subprocess.run([*command[:4], "--manifests", "nowhere"], cwd=tmp_path, env=env, capture_output=True,
                           text=True)
    assert usage.returncode == 2 and "nowhere" in usage.stderr


def test_dask_executor_builds_the_same_release(tmp_path, built):
    from distributed import LocalCluster

    make_repo(tmp_path)
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        report = run_build(config_for(tmp_path, executor="dask", scheduler=cluster.scheduler_address))
    assert report.exit_code == 0, report.failed
    reference_root, reference = built
    assert report.release_rows == reference.release_rows
    sums = lambda root: {line.split()[1]: line.split()[0]  # noqa: E731
                         for line in (root / "data" / "release" / "SHA256SUMS").read_text().splitlines()
                         if "/data/" in "/" + line.split()[1]}
    assert sums(tmp_path) == sums(reference_root)  # same shards, byte for byte


def test_each_dataset_says_when_it_ran_and_for_how_long(built):
    root, report = built
    document = json.loads((root / "data" / "build-report.json").read_text(encoding="utf-8"))
    built_at = (root / "data" / "build-report.json").stat().st_mtime
    for outcome in document["datasets"]:
        assert 0 < outcome["seconds"] < 600
        assert built_at - 600 < outcome["started_at"] <= built_at
        assert outcome["started_at"] + outcome["seconds"] <= built_at + 1


def test_the_dataset_with_most_pinned_bytes_starts_first_and_reports_keep_manifest_order(tmp_path):
    make_repo(tmp_path)
    run_build(config_for(tmp_path))
    lock_path = tmp_path / "manifests" / "manifests.lock"
    lock = yaml.safe_load(lock_path.read_text(encoding="utf-8"))
    sizes = {d: sum(f["size"] for f in entry["files"].values()) for d, entry in lock["datasets"].items()}
    assert sizes["cells"] > sizes["nuclei"]  # alphabetical order is also largest-first here: swap the sizes
    for pin in lock["datasets"]["nuclei"]["files"].values():
        pin["size"] *= 1000  # sizes order the work only; files are verified by their sha256
    lock_path.write_text(yaml.safe_dump(lock), encoding="utf-8")
    shutil.rmtree(tmp_path / "data" / "work")
    report = run_build(config_for(tmp_path))
    assert report.exit_code == 0, report.failed
    started = {o.dataset_id: o.started_at for o in report.datasets}
    assert started["nuclei"] < started["cells"]
    assert [o.dataset_id for o in report.datasets] == ["cells", "nuclei"]
    assert [r.dataset_id for r in report.fetch] == ["cells", "nuclei"]


def test_a_steps_format_bump_reruns_the_steps_and_reuses_the_images(tmp_path, monkeypatch):
    from mmbu.build import steps

    make_repo(tmp_path)
    run_build(config_for(tmp_path))
    images = sorted((tmp_path / "data" / "work" / "cells" / "images").glob("*.png"))
    made = {p: p.stat().st_mtime_ns for p in images}
    monkeypatch.setattr(steps, "STEPS_FORMAT", steps.STEPS_FORMAT + 1)
    report = run_build(config_for(tmp_path))  # jobs=1: the steps run in this process, with the bumped format
    assert report.exit_code == 0, report.failed
    assert all(outcome.ran == ["layout", "select", "convert", "rows", "hashes"] for outcome in report.datasets)
    assert {p: p.stat().st_mtime_ns for p in images} == made


def test_a_png_a_power_cut_emptied_or_damaged_is_converted_again_on_resume(tmp_path, monkeypatch):
    """PNGs are written without fsync (one sync per step): a reused PNG must match the size and CRC its resume
    record noted, so a file lost between its write and the disk is made again; a record whose key differs
    (another source or options) vouches for nothing, and a database that cannot be read starts empty."""
    import sqlite3

    from mmbu.build import steps
    from mmbu.build.convert_resume import RESUME_FILE

    make_repo(tmp_path)
    run_build(config_for(tmp_path))
    work = tmp_path / "data" / "work" / "cells"
    images = sorted((work / "images").glob("*.png"))
    good = {p: p.read_bytes() for p in images}
    images[0].write_bytes(b"")                                   # the name reached the disk, the data did not
    images[1].write_bytes(good[images[1]][: len(good[images[1]]) // 2])
    damaged = bytearray(good[images[2]])
    damaged[len(damaged) // 2] ^= 0xFF                            # same size, one byte wrong
    images[2].write_bytes(bytes(damaged))
    with sqlite3.connect(work / RESUME_FILE) as db:               # a record for another key: a killed rewrite
        db.execute("UPDATE png SET key = 'other' WHERE path = ?", (str(images[3]),))
        db.execute("DELETE FROM png WHERE path = ?", (str(images[4]),))  # never recorded: killed before it
    images[3].write_bytes(good[images[3]][:10])
    images[4].write_bytes(good[images[4]][:10])
    untouched = {p: p.stat().st_mtime_ns for p in images[5:]}
    monkeypatch.setattr(steps, "STEPS_FORMAT", steps.STEPS_FORMAT + 1)  # the step re-runs, as after a crash
    report = run_build(config_for(tmp_path))
    assert report.exit_code == 0, report.failed
    assert all(p.read_bytes() == good[p] for p in images[:5])
    assert {p: p.stat().st_mtime_ns for p in images[5:]} == untouched

    (work / RESUME_FILE).write_bytes(b"torn" * 100)              # not a database: nothing is trusted
    monkeypatch.setattr(steps, "STEPS_FORMAT", steps.STEPS_FORMAT + 2)
    report = run_build(config_for(tmp_path))
    assert report.exit_code == 0, report.failed
    assert all(p.stat().st_mtime_ns != untouched[p] for p in images[5:])  # converted again
    assert all(p.read_bytes() == good[p] for p in images)


def test_a_no_op_rebuild_reports_the_same_rows_per_task(built):
    root, first = built
    again = run_build(config_for(root))
    assert all(outcome.ran == [] for outcome in again.datasets)
    counts = {o.dataset_id: o.rows_per_task for o in again.datasets}
    assert counts == {o.dataset_id: o.rows_per_task for o in first.datasets}
    assert counts["cells"] == {"ungrounded_classification": 8}


def test_local_sources_resolve_from_the_repository_root_wherever_the_manifests_are(tmp_path):
    manifests = make_repo(tmp_path)
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n", encoding="utf-8")
    drafts = tmp_path / "manifests" / "reviews" / "drafts"  # where round-3 drafts live
    drafts.mkdir(parents=True)
    (manifests / "cells.yaml").rename(drafts / "cells.yaml")
    report = run_build(BuildConfig(manifests_dir=drafts, data_dir=tmp_path / "data"))
    assert report.exit_code == 0, report.failed
    assert report.release_rows == {"ungrounded_classification": 8}


def test_a_manifest_edit_that_leaves_the_rows_alone_still_rewrites_the_release(tmp_path):
    manifests = make_repo(tmp_path)
    run_build(config_for(tmp_path))
    path = manifests / "cells.yaml"
    document = yaml.safe_load(path.read_text(encoding="utf-8"))
    document["citation"] = "a corrected citation"  # shown on the dataset card only
    path.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    report = run_build(config_for(tmp_path))
    assert report.release_written
    assert "a corrected citation" in (tmp_path / "data" / "release" / "README.md").read_text(encoding="utf-8")
    assert not run_build(config_for(tmp_path)).release_written


def test_a_new_release_format_rewrites_the_release_from_the_same_rows(tmp_path, monkeypatch):
    make_repo(tmp_path)
    assert run_build(config_for(tmp_path)).datasets
    assert not run_build(config_for(tmp_path)).release_written
    monkeypatch.setattr(pipeline, "RELEASE_FORMAT", pipeline.RELEASE_FORMAT + 1)  # the writer changed, same version
    assert run_build(config_for(tmp_path)).release_written


def test_a_new_question_version_remakes_the_rows_of_a_built_data_folder(tmp_path, monkeypatch):
    make_repo(tmp_path)
    assert run_build(config_for(tmp_path)).datasets
    assert not any("rows" in outcome.ran for outcome in run_build(config_for(tmp_path)).datasets)
    newer = load_prototypes().model_copy(update={"version": "mmbu-questions-next"})
    monkeypatch.setattr(steps, "load_prototypes", lambda: newer)  # wording changed, same package version
    report = run_build(config_for(tmp_path))
    assert report.datasets and all("rows" in outcome.ran for outcome in report.datasets)


def test_a_build_where_every_dataset_fails_still_writes_the_exclusions(tmp_path):
    manifests = tmp_path / "manifests" / "datasets"
    manifests.mkdir(parents=True)
    write_manifest(manifests, "missing", source={"kind": "local", "path": "src/nowhere"},
                   tasks=["ungrounded_classification"], layout={"kind": "folder_per_class"}, metadata=BLOOD,
                   labels=CELL_CLASSES, questions={"options_name": "blood cell type", "n_options": 5})
    report = run_build(config_for(tmp_path))
    assert report.exit_code == 1
    assert report.release_rows == {}
    release = tmp_path / "data" / "release"
    assert "missing" in (release / "exclusions.csv").read_text(encoding="utf-8")
    assert not verify_sha256sums(release)
    assert not list(release.glob("data/*"))  # no empty shard that load_dataset would choke on


def test_every_bad_input_class_is_named_with_dataset_sample_and_reason(tmp_path):
    manifests = tmp_path / "manifests" / "datasets"
    manifests.mkdir(parents=True)
    rng = np.random.default_rng(1)

    def png(path: Path, shape=(24, 32)) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(rng.integers(0, 255, shape, dtype=np.uint8)).save(path)

    # a label table: one good row, one row whose image is missing, one with a stain outside the taxonomy
    for name in ("ok1", "ok2"):
        png(tmp_path / "src" / "table" / f"{name}.png")
    (tmp_path / "src" / "table" / "labels.csv").write_text(
        "image,label,stain\nok1.png,lym,Giemsa\ngone.png,neu,Giemsa\nok2.png,mon,Purple Magic\n", encoding="utf-8")
    write_manifest(manifests, "table", source={"kind": "local", "path": "src/table"},
                   tasks=["ungrounded_classification"], metadata=BLOOD, labels=CELL_CLASSES,
                   layout={"kind": "label_table", "table": "labels.csv", "image_column": "image",
                           "label_column": "label", "metadata_columns": {"stain": "stain"}},
                   questions={"options_name": "blood cell type", "n_options": 5})
    # image/mask pairs: one mask of the wrong size
    png(tmp_path / "src" / "pairs" / "images" / "a.png", (64, 80))
    mask = np.zeros((32, 40), np.uint8)
    mask[4:10, 4:10] = 1
    (tmp_path / "src" / "pairs" / "masks").mkdir()
    Image.fromarray(mask).save(tmp_path / "src" / "pairs" / "masks" / "a.png")
    write_manifest(manifests, "pairs", source={"kind": "local", "path": "src/pairs"},
                   tasks=["mask_grounded_classification"], metadata=NUCLEI, labels={"nuc": "interphase nucleus"},
                   layout={"kind": "image_mask_pairs", "images": "images/*.png", "masks": "masks/*.png",
                           "mask_values": {1: "nuc"}},
                   questions={"options_name": "nuclear appearance", "n_options": 2})
    # questions whose wording the lint rejects (a malignancy word in the question noun)
    for raw in ("lym", "neu"):
        png(tmp_path / "src" / "lint" / raw / "x.png")
    write_manifest(manifests, "lint", source={"kind": "local", "path": "src/lint"},
                   tasks=["ungrounded_classification"], layout={"kind": "folder_per_class"}, metadata=BLOOD,
                   labels={"lym": "lymphocyte", "neu": "neutrophil"},
                   questions={"options_name": "tumour cell type", "n_options": 3})

    report = run_build(config_for(tmp_path))
    assert report.exit_code == 1
    found = {(o.dataset_id, e["stage"], e["item"], e["reason"]) for o in report.datasets for e in o.exclusions}

    def named(dataset: str, stage: str, *words: str) -> bool:
        return any(d == dataset and s == stage and all(w in f"{item} {reason}" for w in words)
                   for d, s, item, reason in found)

    assert named("table", "layout", "gone.png")  # a label without its image
    assert named("table", "metadata", "Purple Magic")  # a per-sample value outside the taxonomy
    assert named("pairs", "layout", "a.png", "40x32")  # a mask of the wrong size
    assert named("lint", "lint", "tumour")  # a question that fails the wording lint
    assert all(e["sample_id"] for o in report.datasets if o.dataset_id == "lint" for e in o.exclusions)
    assert report.release_rows == {"ungrounded_classification": 1}  # ok1 is built; the rest is reported
    exclusions = (tmp_path / "data" / "release" / "exclusions.csv").read_text(encoding="utf-8")
    assert "Purple Magic" in exclusions and "gone.png" in exclusions and "tumour" in exclusions


def test_each_manifest_is_parsed_once_per_build(tmp_path, monkeypatch):
    """Validation parses each manifest; fetch, the worker and the release use that object (they each parsed the
    file again before). Counted where every parse ends: the model's validation of the YAML document."""
    from collections import Counter

    from mmbu.curation.manifest import DatasetManifest

    parsed: Counter = Counter()
    validate = DatasetManifest.model_validate

    def counting(cls, document, *args, **kwargs):
        parsed[document.get("id")] += 1
        return validate(document, *args, **kwargs)

    make_repo(tmp_path)
    monkeypatch.setattr(DatasetManifest, "model_validate", classmethod(counting))
    report = run_build(config_for(tmp_path))  # one job: the worker runs in this process, where the count is
    assert report.exit_code == 0 and report.release_written, report.failed
    assert parsed == {"cells": 1, "nuclei": 1}


def test_rows_made_a_few_samples_at_a_time_are_the_rows_of_one_pass(tmp_path, monkeypatch):
    """The rows step makes items, ROIs, questions and lint SAMPLES_PER_CHUNK samples at a time (its memory);
    with chunks of 2 samples the rows, their order, the exclusions and the lint report are those of one chunk."""
    from mmbu.build import steps

    manifests = tmp_path / "manifests" / "datasets"
    manifests.mkdir(parents=True)
    rng = np.random.default_rng(4)
    write_rows_step_datasets(tmp_path, manifests, rng)

    def outputs(data: Path) -> dict:
        work = data / "work"
        return {name: (pd.read_parquet(work / name / "rows.parquet").drop(columns=["image", "mask", "image_path",
                                                                                   "mask_path"]).to_json(),
                       (work / name / "rows-exclusions.json").read_text(encoding="utf-8"),
                       (work / name / "lint-report.txt").read_text(encoding="utf-8"))
                for name in ("pairs", "lint")}

    one_pass = run_build(BuildConfig(**{**config_for(tmp_path).__dict__, "data_dir": tmp_path / "one"}))
    monkeypatch.setattr(steps, "SAMPLES_PER_CHUNK", 2)
    chunked = run_build(BuildConfig(**{**config_for(tmp_path).__dict__, "data_dir": tmp_path / "chunked"}))
    assert one_pass.release_rows == chunked.release_rows and chunked.release_rows["object_detection"] == 12
    assert outputs(tmp_path / "one") == outputs(tmp_path / "chunked")
    assert "tumour" in outputs(tmp_path / "chunked")["lint"][2]
