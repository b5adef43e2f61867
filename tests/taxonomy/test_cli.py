"""`mmbu taxonomy validate|show` as a user runs them: exit codes, messages, the printed tree."""
from __future__ import annotations

from pathlib import Path

import yaml
from click.testing import CliRunner

from mmbu.cli import cli


def run(*args: str):
    return CliRunner().invoke(cli, ["taxonomy", *args])


def write(tmp_path: Path, document) -> Path:
    path = tmp_path / "taxonomy.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    return path


BROKEN = {
    "schema_version": 1,
    "facets": {
        "modality": {"description": "m", "terms": [
            {"id": "endoscopy", "name": "endoscopy"},
            {"id": "endoscopy", "name": "endoscopic imaging"},
        ]},
        "sub_modality": {"description": "s", "parent_facet": "modality", "terms": [
            {"id": "laparoscopy", "name": "laparoscopy", "parent": "surgery"},
        ]},
        "anatomy": {"description": "a", "terms": [
            {"id": "colon", "name": "colon", "parent": "rectum"},
            {"id": "rectum", "name": "rectum", "parent": "colon", "synonyms": ["colon"]},
        ]},
    },
}


def test_validate_the_bundled_taxonomy_exits_zero():
    result = run("validate")
    assert result.exit_code == 0, result.output
    assert "valid (11 modality" in result.output


def test_validate_reports_every_problem_and_exits_two(tmp_path):
    path = write(tmp_path, BROKEN)
    result = run("validate", "--taxonomy", str(path))
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.startswith(f"Error: {path}") or line.startswith(str(path))]
    assert len(lines) == 4
    assert "facet 'modality', term 'endoscopy': duplicate id" in result.output
    assert "facet 'sub_modality', term 'laparoscopy': parent 'surgery' is not a term of facet 'modality'" in result.output
    assert "facet 'anatomy', term 'colon': parent cycle colon -> rectum -> colon" in result.output
    assert "facet 'anatomy', term 'rectum': synonym 'colon' also resolves to term 'colon'" in result.output
    assert "4 problem(s) found." in result.output
    assert "Traceback" not in result.output


def test_schema_errors_are_all_reported_with_field_paths(tmp_path):
    path = write(tmp_path, {"facets": {"modality": {"description": "m", "terms": [
        {"id": "Bad Id", "name": "x"}, {"name": "no id"}, {"id": "ok", "name": "ok", "colour": "red"}]}}})
    result = run("validate", "--taxonomy", str(path))
    assert result.exit_code == 2
    assert "field facets.modality.terms.0.id" in result.output
    assert "field facets.modality.terms.1.id: Field required" in result.output
    assert "field facets.modality.terms.2.colour: Extra inputs are not permitted" in result.output


def test_unreadable_or_malformed_files_exit_two_without_traceback(tmp_path):
    missing = run("validate", "--taxonomy", str(tmp_path / "nope.yaml"))
    assert missing.exit_code == 2 and "cannot read the taxonomy" in missing.output
    bad = tmp_path / "bad.yaml"
    bad.write_text("facets: [unclosed\n", encoding="utf-8")
    malformed = run("validate", "--taxonomy", str(bad))
    assert malformed.exit_code == 2 and "not valid YAML" in malformed.output
    assert "Traceback" not in missing.output + malformed.output


def test_show_prints_the_tree_with_counts():
    result = run("show", "--facet", "anatomy")
    assert result.exit_code == 0, result.output
    assert "anatomy (" in result.output and " terms)" in result.output
    assert "eye (" in result.output and "fovea" in result.output
    assert "sub_modality" not in result.output


def test_show_groups_sub_modalities_under_their_modality(tmp_path):
    path = write(tmp_path, BROKEN)
    result = run("show", "--taxonomy", str(path), "--facet", "sub_modality")
    assert result.exit_code == 0
    assert "(parent 'surgery' missing) (1)" in result.output
    bundled = run("show", "--facet", "sub_modality")
    assert "modality: electron microscopy (5)" in bundled.output
    assert "cryo-electron tomography" in bundled.output


def test_show_unknown_facet_is_a_usage_error():
    result = run("show", "--facet", "organ")
    assert result.exit_code == 2
    assert "unknown facet(s) organ" in result.output
