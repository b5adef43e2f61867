"""Manifests written to hurt: deep nesting, duplicate keys, 10 MB values (issue 16, points 6 and 15).

Each is one readable line naming the file; the other manifests are still checked."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from mmbu.core.yaml_io import dump_yaml, parse_yaml

REPO = Path(__file__).resolve().parents[3]
DEMO = REPO / "manifests" / "demo" if (REPO / "manifests" / "demo").is_dir() else REPO / "manifests" / "datasets"


def _valid_manifest(folder: Path) -> Path:
    source = DEMO / "demo_fundus_skimage.yaml"
    return Path(shutil.copy(source, folder / source.name))


def _validate(*paths: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mmbu", "manifests", "validate", *map(str, paths)],
                          capture_output=True, text=True, timeout=120, cwd=REPO)


@pytest.mark.parametrize("nesting", ["[" * 50_000 + "]" * 50_000, "a: " + "{a: " * 30_000 + "1" + "}" * 30_000])
def test_deep_nesting_is_one_line_and_the_other_manifests_are_checked(tmp_path, nesting):
    (tmp_path / "deep.yaml").write_text(nesting)
    good = _valid_manifest(tmp_path)
    result = _validate(tmp_path)
    assert result.returncode == 1 and "Traceback" not in result.stderr + result.stdout
    lines = result.stderr.splitlines()
    assert [line for line in lines if line.startswith(str(tmp_path / "deep.yaml"))] == [
        f"{tmp_path / 'deep.yaml'}: (file): not valid YAML: while increasing flow level: exceeded maximum nesting "
        "depth at line 1, column " + ("1001" if nesting.startswith("[") else "4000")]
    assert not any(line.startswith(str(good)) for line in lines)


def test_a_key_written_twice_is_an_error_naming_both_lines(tmp_path):
    path = _valid_manifest(tmp_path)
    text = path.read_text()
    path.write_text(text + "license: CC-BY-4.0\n")  # the demo already says CC0-1.0 further up
    first = 1 + text.splitlines().index("license: CC0-1.0")
    result = _validate(path)
    assert result.returncode == 1
    assert (f"{path}: (file): not valid YAML: while reading a mapping: found the key 'license' twice "
            f"(lines {first} and {len(text.splitlines()) + 1}); keep one") in result.stderr


def test_a_ten_megabyte_value_is_quoted_once_and_short(tmp_path):
    document = yaml.safe_load(_valid_manifest(tmp_path).read_text())
    document["license"] = "X" * 10_000_000
    # libyaml's emitter: PyYAML's own took seconds over the 10 MB scalar
    (tmp_path / "demo_fundus_skimage.yaml").write_text(dump_yaml(document), encoding="utf-8")
    result = _validate(tmp_path / "demo_fundus_skimage.yaml")
    assert result.returncode == 1
    assert len(result.stderr) < 2_000
    assert "more characters)" in result.stderr


def test_the_strict_loader_still_reads_anchors_merges_and_flow_mappings():
    assert parse_yaml("base: &b {x: 1}\nother:\n  <<: *b\n  y: 2\n") == {"base": {"x": 1}, "other": {"x": 1, "y": 2}}
    with pytest.raises(yaml.YAMLError, match="found the key 'a' twice"):
        parse_yaml("{a: 1, a: 2}")
    with pytest.raises(yaml.YAMLError):
        parse_yaml("!!python/object/apply:os.system ['true']")
