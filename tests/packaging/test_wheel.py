"""Issue: `pip install .` works and building a wheel writes nothing into our source folder `build/`."""
from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_wheel_maps_every_stage_and_leaves_build_folder_alone(tmp_path):
    tracked = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    copy = tmp_path / "repo"
    for name in tracked:
        if (REPO / name).is_file():
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, copy / name)
    before = sorted(p.relative_to(copy) for p in (copy / "build").rglob("*"))
    result = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--quiet", "-w",
         str(tmp_path / "dist"), str(copy)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert sorted(p.relative_to(copy) for p in (copy / "build").rglob("*")) == before  # no build/lib, no bdist.*
    wheel = next((tmp_path / "dist").glob("mmbu-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    for expected in ("mmbu/cli.py", "mmbu/taxonomy/taxonomy.yaml", "mmbu/curation/manifest/model.py",
                     "mmbu/build/pipeline.py", "mmbu/build/convert/dicom.py", "mmbu/benchmark_eval/cli.py",
                     "mmbu/core/files.py", "mmbu/core/licences.yaml"):
        assert expected in names, expected
    assert not any(name.startswith(("build/", "taxonomy/", "core/", "tests/")) for name in names)
