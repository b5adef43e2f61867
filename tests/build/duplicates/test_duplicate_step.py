"""The duplicate step in a build: which copy stays, per task, and what exclusions.csv says about the others.

Images are H&E tiles read with openslide from the demo mirror's CMU-1-Small-Region.svs (CC0; PROVENANCE.md),
written by Pillow as PNG, with downscaled JPEG copies standing in for a re-upload of a public set.
"""
from __future__ import annotations

from pathlib import Path

import openslide
import pandas as pd
import yaml
from PIL import Image

from mmbu.build.duplicates import find_duplicates, image_hashes
from mmbu.build.pipeline import BuildConfig, run_build

SLIDE = Path(__file__).resolve().parents[3] / "manifests/mirror/demo_cmu1_wsi/hematoxylin_and_eosin/CMU-1-Small-Region.svs"
TILES = {"t1": (768, 768), "t2": (1280, 512), "t3": (1024, 1536), "t4": (1536, 2048)}  # tissue, not glass
METADATA = {"image_source": "test tiles", "dataset_name": "H&E tiles", "domain": "pathology",
            "modality": "light microscopy", "sub_modality": "brightfield microscopy", "stain": "hematoxylin and eosin",
            "specimen": "human", "topic": "tissue", "original_task": "tissue classification",
            "url": "https://example.org/tiles"}


def tile(name: str, size: int = 256) -> Image.Image:
    with openslide.OpenSlide(SLIDE) as slide:
        return slide.read_region(TILES[name], 0, (size, size)).convert("RGB")


def table_row(path: Path, image_id: str, dataset_id: str, task: str = "ungrounded_classification",
              answer: str | None = "tumour") -> dict:
    hashes = image_hashes(path)
    return {"image_id": image_id, "dataset_id": dataset_id, "source_path": path.name, "task": task,
            "answer": answer, "grey": hashes.grey, "equalised": hashes.equalised, "sha256": hashes.sha256,
            "width": hashes.width, "height": hashes.height, "structure": hashes.structure}


def test_the_larger_copy_stays_and_the_drop_names_it_with_the_distance(tmp_path):
    tile("t1").save(tmp_path / "source.png")
    tile("t1").resize((96, 96), Image.LANCZOS).save(tmp_path / "small.jpg", quality=80)
    tile("t2").save(tmp_path / "other.png")
    images = pd.DataFrame([table_row(tmp_path / "small.jpg", "aaa-1", "aaa", answer="stroma"),
                           table_row(tmp_path / "source.png", "zzz-1", "zzz"),
                           table_row(tmp_path / "other.png", "zzz-2", "zzz")])

    (drop,) = find_duplicates(images, 24)

    assert (drop.image_id, drop.keeper_id) == ("aaa-1", "zzz-1")  # resolution beats the listing order
    assert drop.distance <= 24 and drop.reason.startswith("a near-duplicate (perceptual-hash distance")
    assert "larger image (256×256 against 96×96)" in drop.reason
    assert "different gold answers ('stroma' here, 'tumour' kept)" in drop.reason


def test_same_size_copies_keep_the_dataset_listed_first_and_identical_files_are_distance_0(tmp_path):
    tile("t3").save(tmp_path / "a.png")
    tile("t3").save(tmp_path / "b.png")
    images = pd.DataFrame([table_row(tmp_path / "b.png", "kaggle_copy-1", "kaggle_copy"),
                           table_row(tmp_path / "a.png", "ham-1", "ham")])
    (drop,) = find_duplicates(images, 24)
    assert (drop.image_id, drop.keeper_id, drop.distance) == ("kaggle_copy-1", "ham-1", 0)
    assert drop.reason.startswith("the same file of ham-1") and "the dataset listed first" in drop.reason


def test_one_image_in_two_tasks_is_two_questions_not_a_duplicate(tmp_path):
    tile("t4").save(tmp_path / "a.png")
    tile("t4").save(tmp_path / "b.png")
    images = pd.DataFrame([table_row(tmp_path / "a.png", "whole-1", "whole"),
                           table_row(tmp_path / "b.png", "masks-1", "masks", task="mask_grounded_classification",
                                     answer=None)])
    assert find_duplicates(images, 24) == []


def test_flat_images_are_copies_only_when_their_files_are_identical(tmp_path):
    """Every one-level image has the same pHash whatever the level: dark and bright fields are not copies."""
    import numpy as np

    for name, level in (("dark", 40), ("bright", 200)):
        Image.fromarray(np.full((24, 32, 3), level, np.uint8)).save(tmp_path / f"{name}.png")
    Image.fromarray(np.full((24, 32, 3), 40, np.uint8)).save(tmp_path / "dark-again.png")
    rows = [table_row(tmp_path / f"{name}.png", f"{name}-1", name) for name in ("dark", "bright", "dark-again")]
    assert rows[0]["grey"] == rows[1]["grey"] and rows[0]["structure"] < 2
    (drop,) = find_duplicates(pd.DataFrame(rows), 24)
    assert (drop.image_id, drop.keeper_id, drop.distance) == ("dark-again-1", "dark-1", 0)


def test_a_chain_of_copies_keeps_one(tmp_path):
    base = tile("t2", 512)
    base.save(tmp_path / "full.png")
    base.resize((256, 256), Image.LANCZOS).save(tmp_path / "half.jpg", quality=85)
    base.resize((128, 128), Image.LANCZOS).save(tmp_path / "quarter.jpg", quality=70)
    images = pd.DataFrame([table_row(tmp_path / name, f"d{i}-1", f"d{i}")
                           for i, name in enumerate(("quarter.jpg", "half.jpg", "full.png"))])
    drops = find_duplicates(images, 24)
    assert sorted(d.image_id for d in drops) == ["d0-1", "d1-1"] and {d.keeper_id for d in drops} == {"d2-1"}


def test_tasks_searched_on_worker_processes_give_the_drops_and_counts_of_one_search(tmp_path):
    """The build runs each task's search as a job on its workers (`run_jobs`): the same drops, in the same order, and
    the same search counts as the tasks searched one after the other here."""
    from mmbu.build.duplicates.index import LinkStats
    from mmbu.build.executors import run_all

    rows = []
    for task_index, task in enumerate(("ungrounded_classification", "box_grounded_classification",
                                       "mask_grounded_classification")):
        for name in list(TILES)[task_index:]:
            base = tile(name, 384)
            base.save(tmp_path / f"{task}-{name}.png")
            base.resize((128, 128), Image.LANCZOS).save(tmp_path / f"{task}-{name}-small.jpg", quality=80)
            rows += [table_row(tmp_path / f"{task}-{name}.png", f"big-{name}", "big", task),
                     table_row(tmp_path / f"{task}-{name}-small.jpg", f"small-{name}", "small", task)]
    images = pd.DataFrame(rows)
    jobs_seen = []

    def on_two_processes(function, jobs):
        jobs_seen.append([len(job.sha256) for job in jobs])
        results = dict(run_all(function, jobs, jobs=2))
        return [results[index] for index in range(len(jobs))]

    here, there = LinkStats(), LinkStats()
    serial = find_duplicates(images, 24, here)
    parallel = find_duplicates(images, 24, there, run_jobs=on_two_processes)
    assert parallel == serial and there == here
    assert len(serial) == 4 + 3 + 2 and here.comparisons > 0
    assert jobs_seen == [[8, 6, 4]]  # one job per task, the largest first


def write_dataset(root: Path, dataset_id: str, images: dict[str, Image.Image], suffix: str) -> None:
    for label, image in images.items():
        folder = root / "src" / dataset_id / label
        folder.mkdir(parents=True)
        image.save(folder / f"{dataset_id}{suffix}", **({"quality": 80} if suffix == ".jpg" else {}))
    labels = {"tumour": "tumour", "stroma": "stroma"}
    document = {"id": dataset_id, "title": dataset_id, "license": "CC0-1.0", "citation": "test tiles",
                "source": {"kind": "local", "path": f"src/{dataset_id}"}, "tasks": ["ungrounded_classification"],
                "layout": {"kind": "folder_per_class"}, "metadata": METADATA | {"dataset_name": dataset_id},
                "labels": labels, "questions": {"options_name": "tissue type", "n_options": 3},
                "curation": {"round": 3, "reviewers": ["tester"]}}
    manifests = root / "manifests" / "datasets"
    manifests.mkdir(parents=True, exist_ok=True)
    (manifests / f"{dataset_id}.yaml").write_text(yaml.safe_dump(document), encoding="utf-8")


def test_a_build_drops_the_reupload_and_says_why_in_exclusions_csv(tmp_path, monkeypatch):
    # "original": two tiles; "reupload": a downscaled JPEG copy of the first, under another label
    write_dataset(tmp_path, "original", {"tumour": tile("t1"), "stroma": tile("t2")}, ".png")
    write_dataset(tmp_path, "reupload", {"stroma": tile("t1").resize((128, 128), Image.LANCZOS),
                                         "tumour": tile("t3")}, ".jpg")
    config = BuildConfig(manifests_dir=tmp_path / "manifests" / "datasets", data_dir=tmp_path / "data",
                         repo_root=tmp_path)

    report = run_build(config)

    assert report.exit_code == 1 and not report.failed  # an exclusion, not a failure
    exclusions = pd.read_csv(config.release_dir / "exclusions.csv")
    (dropped,) = exclusions[exclusions["stage"] == "duplicates"].itertuples()
    assert dropped.dataset_id == "reupload" and dropped.item == "stroma/reupload.jpg"
    assert dropped.duplicate_of.startswith("original-") and 0 <= dropped.distance <= 24
    assert "different gold answers ('stroma' here, 'tumour' kept)" in dropped.reason
    assert report.release_rows == {"ungrounded_classification": 3}
    rows = pd.read_parquet(next((config.release_dir / "data" / "ungrounded_classification").glob("*.parquet")),
                           columns=["sample_id", "dataset_id"])
    assert dropped.sample_id not in set(rows["sample_id"])

    def no_search(*args, **kwargs):
        raise AssertionError("the duplicate check ran again though no rows or hashes changed")

    with monkeypatch.context() as patched:  # a rebuild reads the saved decision and leaves the release alone
        patched.setattr("mmbu.build.duplicates.check.find_duplicates", no_search)
        again = run_build(config)
    assert not again.release_written and again.duplicates.exclusions == report.duplicates.exclusions
    assert again.duplicates.drops == report.duplicates.drops
    assert all("hashes" in o.skipped for o in again.datasets)
    saved = config.data_dir / "work" / "duplicates.json"
    saved.write_text("{torn", encoding="utf-8")  # a torn file is checked again, with the same decision
    assert run_build(config).duplicates.drops == report.duplicates.drops

    kept = run_build(BuildConfig(**{**config.__dict__, "duplicate_distance": None}))
    assert kept.release_rows == {"ungrounded_classification": 4}
