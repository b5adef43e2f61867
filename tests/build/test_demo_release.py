"""`make demo` offline: the repository's demo manifests (manifests/demo/) + bundled mirror build a complete, valid release."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from mmbu.build.pipeline import BuildConfig, run_build
from mmbu.build.release import CONFIGS, CONTRACT_COLUMNS, verify_sha256sums

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    work = tmp_path_factory.mktemp("demo")
    lock = work / "manifests.lock"
    shutil.copy(REPO / "manifests" / "manifests.lock", lock)  # the test must not rewrite the repository's pins
    config = BuildConfig(manifests_dir=REPO / "manifests" / "demo", data_dir=work / "data",
                         mirror=REPO / "manifests" / "mirror", lock_path=lock, repo_root=REPO, jobs=2)
    return config, run_build(config)


def test_demo_builds_cleanly_from_the_mirror(demo):
    _, report = demo
    assert report.failed == []
    assert report.exclusions == 0  # pandera validation and the wording lint dropped nothing
    assert report.exit_code == 0
    assert [fetch.fetched_from for fetch in report.fetch] == ["mirror"] * len(report.fetch)  # no network
    assert set(report.release_rows) == set(CONFIGS)  # all four tasks


def test_every_config_loads_both_ways(demo, tmp_path):
    from datasets import load_dataset

    config, report = demo
    release = config.release_dir
    for name in CONFIGS:
        files = sorted(str(p) for p in (release / "data" / name).glob("*.parquet"))
        direct = load_dataset("parquet", data_files=files, split="train", cache_dir=str(tmp_path / "a"))
        by_config = load_dataset(str(release), name, split="test", cache_dir=str(tmp_path / "b"))
        assert len(direct) == len(by_config) == report.release_rows[name]
        assert set(CONTRACT_COLUMNS) <= set(by_config.column_names)
        row = by_config[0]
        assert row["answer"] in row["options"]
        assert row["image"].mode in ("L", "RGB")


def test_demo_covers_the_promised_modalities(demo):
    import pyarrow.parquet as pq

    config, _ = demo
    seen = set()
    for name in CONFIGS:
        for shard in (config.release_dir / "data" / name).glob("*.parquet"):
            table = pq.read_table(shard, columns=["modality", "sub_modality", "source_path"])
            seen |= {(m, s, Path(p).suffix.lower()) for m, s, p in zip(*(table[c].to_pylist() for c in table.column_names))}
    modalities = {m for m, _, _ in seen}
    suffixes = {suffix for _, _, suffix in seen}
    assert {"digital pathology", "fluorescence microscopy", "magnetic resonance imaging", "optical imaging"} <= modalities
    assert {".dcm", ".nii", ".svs"} <= suffixes  # DICOM, NIfTI and a whole-slide image


def test_every_closed_detection_row_has_exactly_one_right_answer(demo):
    """Each wrong box lies on the image's content, holds no instance of the target, has the answer's size and stands
    apart from the other options; the closed question asks for one instance (box_options, issue 28)."""
    import io

    import pyarrow.parquet as pq
    from PIL import Image

    from mmbu.build.questions.box_options import box_option_problems
    from mmbu.build.questions.content import content_mask

    config, _ = demo
    rows = 0
    for shard in (config.release_dir / "data" / "object_detection").glob("*.parquet"):
        for row in pq.read_table(shard).to_pylist():
            image = Image.open(io.BytesIO(row["image"]["bytes"]))
            problems = box_option_problems(row["options"], row["answer"], row["boxes"], image.size, content_mask(image))
            assert problems == [], (row["dataset_id"], problems)
            assert row["closed_question_no_context"].startswith("Which box contains a ")
            rows += 1
    assert rows == 2  # the nuclei and the liver lesion


def test_the_demo_passes_the_wording_rules(demo):
    """The catalogue's wording rules hold for the demo too: it is what a new user reads first."""
    import pandas as pd

    from mmbu.build.questions.wording_rules import wording_problems
    from mmbu.curation.manifest import load_manifest
    from mmbu.taxonomy.model import load_taxonomy

    config, _ = demo
    rows = pd.concat([pd.read_parquet(shard).drop(columns=["image", "mask"])
                      for name in CONFIGS for shard in (config.release_dir / "data" / name).glob("*.parquet")])
    for dataset_id, group in rows.groupby("dataset_id"):
        manifest = load_manifest(REPO / "manifests" / "demo" / f"{dataset_id}.yaml")
        assert wording_problems(group.to_dict(orient="records"), manifest, load_taxonomy()) == [], dataset_id


def test_the_review_sheet_of_the_demo(demo, tmp_path):
    """`mmbu release preview` on the demo: every dataset and task on one page, its images beside it."""
    import re

    from click.testing import CliRunner

    from mmbu.cli import cli

    config, report = demo
    result = CliRunner().invoke(cli, ["release", "preview", str(config.release_dir), "--out", str(tmp_path / "sheet"),
                                      "--per-dataset", "2"])
    assert result.exit_code == 0, result.output
    page = (tmp_path / "sheet" / "index.html").read_text(encoding="utf-8")
    images = re.findall(r'<img src="(img/[^"]+)"', page)
    assert images and all((tmp_path / "sheet" / name).is_file() for name in images)
    assert page.count("<article>") == sum(min(2, n) for n in _rows_per_dataset_and_task(config.release_dir))
    assert "Which box contains a cell nucleus" in page and "the closed options&#x27; boxes" in page


def _rows_per_dataset_and_task(release_dir):
    import pyarrow.parquet as pq
    from collections import Counter

    counts = Counter()
    for name in CONFIGS:
        for shard in (release_dir / "data" / name).glob("*.parquet"):
            counts.update((name, d) for d in pq.read_table(shard, columns=["dataset_id"]).column(0).to_pylist())
    return counts.values()


def test_croissant_and_checksums_validate(demo):
    import mlcroissant as mlc

    config, _ = demo
    dataset = mlc.Dataset(jsonld=config.release_dir / "croissant.json")
    assert not dataset.metadata.ctx.issues.errors
    assert verify_sha256sums(config.release_dir) == []


def test_second_build_is_a_fast_no_op(demo):
    config, _ = demo
    again = run_build(config)
    assert again.exit_code == 0
    assert not again.release_written
    assert all(not outcome.ran for outcome in again.datasets)
    assert all(fetch.status == "up_to_date" for fetch in again.fetch)
