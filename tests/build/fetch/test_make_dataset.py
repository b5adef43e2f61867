"""`make dataset` (= `mmbu build --manifests manifests/datasets`) without a network: the plan first, one line per
host that does not answer naming its datasets, exit 1 in seconds, no traceback, no credentials asked of a host that
is not there; the datasets that can be had still build, and a release on disk is never replaced by a smaller one
unless --allow-partial."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import yaml
from PIL import Image
from support.loopback import closed_port_url

from mmbu.build.release.guard import why_keep

REPO = Path(__file__).resolve().parents[3]
REVISION = "0123456789abcdef0123456789abcdef01234567"


def mmbu_build(manifests_dir: Path, data_dir: Path, env: dict[str, str],
               *extra: str) -> tuple[subprocess.CompletedProcess, float]:
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "mmbu", "build", "--manifests", str(manifests_dir),
                             "--data", str(data_dir), *extra], capture_output=True, text=True, timeout=120,
                            env={**os.environ, **env}, cwd=manifests_dir.parent.parent)
    return result, time.monotonic() - started


def offline_env() -> dict[str, str]:
    dead = closed_port_url()
    return {"MMBU_ZENODO_URL": dead, "MMBU_KAGGLE_URL": dead, "HF_ENDPOINT": "https://hub.mmbu-test.invalid",
            "KAGGLE_USERNAME": "someone", "KAGGLE_KEY": "0123456789abcdef"}


def write_remote_manifests(write_manifest, manifests_dir: Path) -> list[str]:
    sources = {"zen": {"kind": "zenodo", "record": 12},
               "hub": {"kind": "huggingface", "repo": "org/skin", "revision": REVISION},
               "kag": {"kind": "kaggle", "dataset": "o/d", "version": 1},
               "web": {"kind": "url", "files": [{"url": "https://files.mmbu-test.invalid/a.zip"}]}}
    for dataset_id, source in sources.items():
        write_buildable(write_manifest, manifests_dir, dataset_id, source)
    return sorted(sources)


def write_buildable(write_manifest, manifests_dir: Path, dataset_id: str, source: dict) -> None:
    """The fetch tests' manifest, made valid for a build (two labels give three options with 'None of the above')."""
    write_manifest(dataset_id, source)
    path = manifests_dir / f"{dataset_id}.yaml"
    document = yaml.safe_load(path.read_text(encoding="utf-8"))
    document["questions"]["n_options"] = 3
    path.write_text(yaml.safe_dump(document), encoding="utf-8")


def test_offline_every_host_fails_in_seconds_with_one_line_naming_its_datasets(write_manifest, manifests_dir,
                                                                              data_dir):
    ids = write_remote_manifests(write_manifest, manifests_dir)
    env = offline_env()

    result, elapsed = mmbu_build(manifests_dir, data_dir, env)

    assert result.returncode == 1, result.stdout + result.stderr
    assert elapsed < 30, elapsed  # a Python start-up plus one short probe per host, not minutes of backoff
    assert "Traceback" not in result.stdout + result.stderr
    assert result.stdout.startswith("Fetch plan: 4 dataset(s)")
    hosts = dict(re.findall(r"^✗ host (\S+) is unreachable \(.+?\): \d dataset\(s\) not fetched: (.+) \(details: "
                            r"build-report.json\)$", result.stderr, flags=re.M))
    dead = env["MMBU_ZENODO_URL"].removeprefix("http://")  # Zenodo and Kaggle share the dead address here
    assert hosts == {dead: "kag, zen", "hub.mmbu-test.invalid": "hub", "files.mmbu-test.invalid": "web"}
    assert not re.search(r"^✗ dataset ", result.stderr, flags=re.M)  # no line per dataset
    assert "no dataset was built" in result.stderr
    report = json.loads((data_dir / "build-report.json").read_text())
    assert sorted(f["dataset_id"] for f in report["fetch"] if "is unreachable" in f["error"]) == ids
    assert not list((data_dir / "release").glob("data/*"))  # no release was there: one without rows names them
    assert sorted(re.findall(r"^(\w+),,", (data_dir / "release" / "exclusions.csv").read_text(), flags=re.M)) == ids
    before = (data_dir / "release" / "SHA256SUMS").read_bytes()
    again, _ = mmbu_build(manifests_dir, data_dir, env)  # still offline: the same (empty) release stays
    assert again.returncode == 1 and (data_dir / "release" / "SHA256SUMS").read_bytes() == before


def test_offline_kaggle_is_unreachable_before_it_needs_credentials(write_manifest, manifests_dir, data_dir, tmp_path):
    write_buildable(write_manifest, manifests_dir, "kag", {"kind": "kaggle", "dataset": "o/d", "version": 1})
    env = {key: value for key, value in offline_env().items() if not key.startswith("KAGGLE_")}
    env["KAGGLE_CONFIG_DIR"] = str(tmp_path / "no-kaggle-config")  # no kaggle.json either
    hidden = {key: "" for key in ("KAGGLE_USERNAME", "KAGGLE_KEY", "KAGGLE_API_TOKEN")}

    result, _ = mmbu_build(manifests_dir, data_dir, {**env, **hidden})

    assert result.returncode == 1
    assert re.search(r"^✗ host \S+ is unreachable \(connection refused\): 1 dataset\(s\) not fetched: kag ",
                     result.stderr, flags=re.M), result.stderr
    assert "credentials" not in result.stdout + result.stderr


def test_one_host_down_is_reported_and_the_rest_builds(write_manifest, manifests_dir, data_dir, tmp_path):
    write_remote_manifests(write_manifest, manifests_dir)
    for label, value in (("a", 40), ("b", 200)):  # a local dataset that needs no host
        folder = tmp_path / "repo" / "cells" / label
        folder.mkdir(parents=True)
        Image.fromarray(np.full((24, 32), value, np.uint8)).save(folder / f"{label}.png")
    write_buildable(write_manifest, manifests_dir, "cells", {"kind": "local", "path": "cells"})

    result, _ = mmbu_build(manifests_dir, data_dir, offline_env())

    assert result.returncode == 1
    assert len(re.findall(r"^✗ host ", result.stderr, flags=re.M)) == 3
    assert (data_dir / "release" / "data" / "ungrounded_classification").is_dir()
    assert "release" in result.stderr and "written" in result.stderr


def test_a_smaller_build_keeps_the_release_on_disk_unless_allowed(write_manifest, manifests_dir, data_dir, tmp_path):
    for name, values in (("cells", (40, 200)), ("more", (90, 150))):  # two local datasets
        for label, value in zip("ab", values):
            folder = tmp_path / "repo" / name / label
            folder.mkdir(parents=True)
            Image.fromarray(np.full((24, 32), value, np.uint8)).save(folder / f"{label}.png")
        write_buildable(write_manifest, manifests_dir, name, {"kind": "local", "path": name})
    first, _ = mmbu_build(manifests_dir, data_dir, {})
    assert first.returncode == 0, first.stderr
    before = (data_dir / "release" / "SHA256SUMS").read_bytes()
    rows = json.loads((data_dir / "release" / "build_info.json").read_text())["rows"]

    write_buildable(write_manifest, manifests_dir, "more", {"kind": "url", "files": [
        {"url": "https://files.mmbu-test.invalid/more.zip"}]})  # its host is down now
    kept, _ = mmbu_build(manifests_dir, data_dir, offline_env())
    assert kept.returncode == 1
    assert "kept as it was" in kept.stderr and "--allow-partial" in kept.stderr
    assert f"against the {sum(rows.values()):,} of the release on disk" in " ".join(kept.stderr.split())
    assert (data_dir / "release" / "SHA256SUMS").read_bytes() == before
    assert json.loads((data_dir / "build-report.json").read_text())["release_kept"]

    partial, _ = mmbu_build(manifests_dir, data_dir, offline_env(), "--allow-partial")
    assert partial.returncode == 1 and "written" in partial.stderr
    smaller = json.loads((data_dir / "release" / "build_info.json").read_text())["rows"]
    assert sum(smaller.values()) < sum(rows.values())



def test_no_row_at_all_never_replaces_a_release_with_rows_but_is_written_where_there_is_none(tmp_path):
    release = tmp_path / "release"
    assert why_keep(release, {}) is None  # nothing on disk: the release without rows names what failed
    release.mkdir()
    (release / "build_info.json").write_text(json.dumps({"rows": {"ungrounded_classification": 12}}))
    assert why_keep(release, {}) == "no dataset built any row (the release on disk has 12)"
    assert why_keep(release, {"ungrounded_classification": 11}).startswith("the new build has 11 rows against the 12")
    assert why_keep(release, {"ungrounded_classification": 12}) is None


def test_an_empty_catalogue_is_said_plainly(manifests_dir, data_dir):
    result, _ = mmbu_build(manifests_dir, data_dir, {})
    assert result.returncode == 0
    assert "holds no manifest (*.yaml) yet: nothing to build" in result.stdout
    assert "make demo" in result.stdout


def test_make_targets_point_at_the_right_folders():
    """`make demo` builds manifests/demo from the bundled mirror; `make dataset` the real catalogue from the network."""
    made = subprocess.run(["make", "-n", "-o", ".venv/.mmbu-installed", "demo", "dataset"], cwd=REPO,
                          capture_output=True, text=True, check=True).stdout.splitlines()
    demo, dataset = (line for line in made if " build " in line)
    assert "--manifests manifests/demo --mirror manifests/mirror" in demo
    assert "--manifests manifests/datasets" in dataset and "--mirror" not in dataset
    for folder in ("manifests/demo", "manifests/mirror", "manifests/datasets"):
        assert (REPO / folder).is_dir(), folder
