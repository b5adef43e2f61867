"""`make dataset` (= `mmbu build --manifests manifests/datasets`) without a network: the plan first, one line per
dataset whose host does not answer, exit 1 in seconds, no traceback; the datasets that can be had still build."""
from __future__ import annotations

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

REPO = Path(__file__).resolve().parents[3]
REVISION = "0123456789abcdef0123456789abcdef01234567"


def mmbu_build(manifests_dir: Path, data_dir: Path, env: dict[str, str]) -> tuple[subprocess.CompletedProcess, float]:
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "mmbu", "build", "--manifests", str(manifests_dir),
                             "--data", str(data_dir)], capture_output=True, text=True, timeout=120,
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


def test_offline_every_dataset_fails_in_seconds_with_one_line(write_manifest, manifests_dir, data_dir):
    ids = write_remote_manifests(write_manifest, manifests_dir)

    result, elapsed = mmbu_build(manifests_dir, data_dir, offline_env())

    assert result.returncode == 1, result.stdout + result.stderr
    assert elapsed < 30, elapsed  # a Python start-up plus one short probe per host, not minutes of backoff
    assert "Traceback" not in result.stdout + result.stderr
    assert result.stdout.startswith("Fetch plan: 4 dataset(s)")
    failures = re.findall(r"^✗ dataset (\S+): (.+)$", result.stderr, flags=re.M)
    assert sorted(d for d, _ in failures) == ids  # exactly one line per dataset
    assert all("is unreachable" in cause for _, cause in failures)
    assert "no dataset was built" in result.stderr
    assert not list((data_dir / "release").glob("data/*"))  # no rows; exclusions.csv names each dataset
    assert sorted(re.findall(r"^(\w+),,", (data_dir / "release" / "exclusions.csv").read_text(), flags=re.M)) == ids


def test_one_host_down_is_reported_and_the_rest_builds(write_manifest, manifests_dir, data_dir, tmp_path):
    write_remote_manifests(write_manifest, manifests_dir)
    for label, value in (("a", 40), ("b", 200)):  # a local dataset that needs no host
        folder = tmp_path / "repo" / "cells" / label
        folder.mkdir(parents=True)
        Image.fromarray(np.full((24, 32), value, np.uint8)).save(folder / f"{label}.png")
    write_buildable(write_manifest, manifests_dir, "cells", {"kind": "local", "path": "cells"})

    result, _ = mmbu_build(manifests_dir, data_dir, offline_env())

    assert result.returncode == 1
    assert len(re.findall(r"^✗ dataset ", result.stderr, flags=re.M)) == 4
    assert (data_dir / "release" / "data" / "ungrounded_classification").is_dir()
    assert "release" in result.stderr and "written" in result.stderr


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
