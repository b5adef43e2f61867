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
