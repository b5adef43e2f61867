"""`mmbu manifests validate|schema` as contributors and CI run them."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

sys.path.insert(0, str(Path(__file__).parent))
from factories import manifest_dict, write_manifest  # noqa: E402

from mmbu.cli import cli
from mmbu.curation.manifest.cli import manifest_json_schema, render_json_schema
from mmbu.curation.manifest.validate import find_manifest_files, validate_files
from mmbu.taxonomy import load_taxonomy


def run(*args: str):
    return CliRunner().invoke(cli, ["manifests", *args])


def test_valid_manifests_exit_zero(tmp_path):
    write_manifest(tmp_path, manifest_dict())
    write_manifest(tmp_path, manifest_dict(id="second"))
    result = run("validate", str(tmp_path))
    assert result.exit_code == 0, result.output
    assert "2 manifest(s) checked: all valid." in result.output


def test_invalid_manifests_exit_one_and_list_file_field_reason(tmp_path):
    good = write_manifest(tmp_path, manifest_dict())
    bad = write_manifest(tmp_path, manifest_dict(id="bad", license="NOASSERTION", metadata__modality="radiology"))
    result = run("validate", str(good), str(bad))
    assert result.exit_code == 1
    assert f"{bad}: license: 'NOASSERTION' is not a licence" in result.output
    assert f"{bad}: metadata.modality: 'radiology' is not a term of the taxonomy facet 'modality'" in result.output
    assert "2 manifest(s) checked: 1 invalid, 2 error(s)." in result.output
    assert str(good) + ":" not in result.output


def test_missing_path_or_taxonomy_exits_two(tmp_path):
    missing = run("validate", str(tmp_path / "nope"))
    assert missing.exit_code == 2 and "no such file or directory" in missing.output
    write_manifest(tmp_path, manifest_dict())
    no_taxonomy = run("validate", str(tmp_path), "--taxonomy", str(tmp_path / "tax.yaml"))
    assert no_taxonomy.exit_code == 2 and "cannot read the taxonomy" in no_taxonomy.output
    assert "Traceback" not in missing.output + no_taxonomy.output


def test_default_directory_is_manifests_datasets(tmp_path):
    write_manifest(tmp_path / "manifests" / "datasets", manifest_dict())
    result = subprocess.run([sys.executable, "-m", "mmbu", "manifests", "validate"], cwd=tmp_path,
                            capture_output=True, text=True, env={**os.environ})
    assert result.returncode == 0, result.stderr
    assert "1 manifest(s) checked: all valid." in result.stdout


def test_schema_is_printed_and_written_atomically(tmp_path):
    printed = run("schema")
    assert printed.exit_code == 0
    assert json.loads(printed.output)["title"] == "DatasetManifest"
    out = tmp_path / "nested" / "manifest.schema.json"
    written = run("schema", "--out", str(out))
    assert written.exit_code == 0
    assert out.read_text(encoding="utf-8") == render_json_schema()
    assert [p.name for p in out.parent.iterdir()] == ["manifest.schema.json"]


def test_committed_schema_matches_the_models(repo_root):
    committed = json.loads((repo_root / "manifests" / "manifest.schema.json").read_text(encoding="utf-8"))
    assert committed == manifest_json_schema(), (
        "manifests/manifest.schema.json is stale; run `mmbu manifests schema --out manifests/manifest.schema.json`"
    )
    assert set(committed["required"]) >= {"id", "source", "license", "tasks", "layout", "metadata", "labels"}


@pytest.mark.parametrize("folder", ["datasets", "demo"])
def test_every_manifest_in_the_repository_is_valid(repo_root, folder):
    """This is how CI validates contributors' manifests (the real catalogue and the offline demo)."""
    files = find_manifest_files([repo_root / "manifests" / folder])
    report = validate_files(files, load_taxonomy())
    assert [str(p) for p in report.problems] == []
    assert len(report.files) == len(list((repo_root / "manifests" / folder).glob("*.y*ml")))


def test_the_example_in_the_contributor_guide_validates(repo_root, tmp_path):
    guide = (repo_root / "manifests" / "README.md").read_text(encoding="utf-8")
    example = guide.split("```yaml\n", 1)[1].split("```", 1)[0]
    stem = example.split("id: ", 1)[1].split()[0]
    (tmp_path / f"{stem}.yaml").write_text(example, encoding="utf-8")
    result = run("validate", str(tmp_path / f"{stem}.yaml"))
    assert result.exit_code == 0, result.output
