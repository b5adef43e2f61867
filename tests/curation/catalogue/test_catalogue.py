"""`mmbu catalogue`: coverage of manifests written by the real YAML writer, against the bundled taxonomy and the
paper's targets; Markdown, JSON and the chart (read back with Pillow); the comparison CI shows on a pull request."""
from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

import numpy as np
from click.testing import CliRunner
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "manifest"))
from factories import manifest_dict, write_manifest  # noqa: E402

from mmbu.cli import cli
from mmbu.curation.catalogue import catalogue_coverage, paper_targets
from mmbu.taxonomy import load_taxonomy

BRAIN = {"domain": "neurology", "modality": "magnetic resonance imaging", "sub_modality": "structural MRI",
         "stain": None, "specimen": "human", "specimen_subregion": "brain", "topic": "brain tumours",
         "original_task": "tumour segmentation"}


def catalogue(folder: Path) -> Path:
    """Three datasets: blood smears (classification, Zenodo, primary evidence), brain MR (segmentation, Hugging
    Face, CC-BY-SA-4.0, no sample count) and a detection set from a URL with only secondary layout evidence."""
    write_manifest(folder, manifest_dict())
    brain = manifest_dict(id="brain_mr", license="CC-BY-SA-4.0",
                          source={"kind": "huggingface", "repo": "org/brain", "revision": "a" * 40},
                          tasks=["mask_grounded_classification", "box_grounded_classification"],
                          layout={"kind": "image_mask_pairs", "images": "img/*.png", "masks": "seg/*.png",
                                  "mask_values": {1: "neutrophil"}})
    brain["metadata"].update(BRAIN)
    brain["evidence"] = copy.deepcopy(brain["evidence"])
    brain["evidence"]["samples"] = {"cites": {"source": "https://example.org/brain", "level": "secondary"}}
    write_manifest(folder, brain)
    boxes = manifest_dict(id="parasite_boxes", tasks=["object_detection"],
                          source={"kind": "url", "files": [{"url": "https://data.example.org/malaria.zip"}]})
    boxes["evidence"] = copy.deepcopy(boxes["evidence"])
    boxes["evidence"]["host"] = {"source": "https://data.example.org", "level": "secondary"}
    boxes["evidence"]["samples"]["count"] = 1364
    write_manifest(folder, boxes)
    return folder


def test_counts_per_modality_kind_host_licence_and_level(tmp_path):
    coverage = catalogue_coverage(catalogue(tmp_path / "datasets"), load_taxonomy())

    assert (coverage.datasets, coverage.samples, coverage.unknown_counts) == (3, 17092 + 1364, 1)
    modalities = {m.name: m for m in coverage.modalities}
    assert modalities["light microscopy"].datasets == 2 and modalities["light microscopy"].samples == 18456
    brightfield = {s.name: s for s in modalities["light microscopy"].sub_modalities}["brightfield microscopy"]
    assert brightfield.dataset_ids == ["blood_cells", "parasite_boxes"]
    mri = modalities["magnetic resonance imaging"]
    assert mri.datasets == 1 and mri.unknown_counts == 1 and "diffusion magnetic resonance imaging" in mri.gaps
    assert "computed tomography" in coverage.modality_gaps and "light microscopy" not in coverage.modality_gaps
    assert {t.name: t.datasets for t in coverage.source_kinds} == {"classification": 1, "segmentation": 1,
                                                                  "detection": 1}
    assert {t.name: t.datasets for t in coverage.tasks}["box_grounded_classification"] == 1
    assert {t.name: t.dataset_ids for t in coverage.hosts} == {"zenodo.org": ["blood_cells"],
                                                              "huggingface.co": ["brain_mr"],
                                                              "data.example.org": ["parasite_boxes"]}
    assert {t.name: t.datasets for t in coverage.licences} == {"CC-BY-4.0": 2, "CC-BY-SA-4.0": 1}
    # the weakest of host, licence and layout: the factory's layout evidence is secondary
    assert {t.name: t.datasets for t in coverage.levels} == {"primary": 0, "secondary": 3, "unverified": 0,
                                                            "no evidence": 0}
    assert coverage.fact_levels["host"] == {"primary": 2, "secondary": 1, "unverified": 0}
    assert coverage.paper.sources_by_kind == {"classification": 250, "segmentation": 84, "detection": 76}
    # the factory's licence is read on the host's Zenodo record
    assert {t.name: t.dataset_ids for t in coverage.licence_bases} == {
        "host": ["blood_cells", "brain_mr", "parasite_boxes"], "independent listings": [], "single listing": [],
        "no evidence": []}


def test_licences_on_a_single_listing_are_counted_and_named(tmp_path):
    folder = catalogue(tmp_path / "datasets")
    listed = manifest_dict(id="listed_cells")
    listed["evidence"] = copy.deepcopy(listed["evidence"])
    listed["evidence"]["licence"] = {"source": "dataset-ninja/cells@0123456:src/settings.py", "level": "secondary"}
    listed["evidence"]["licence_single_listing"] = True
    write_manifest(folder, listed)
    coverage = catalogue_coverage(folder, load_taxonomy())
    assert {t.name: t.dataset_ids for t in coverage.licence_bases}["single listing"] == ["listed_cells"]
    result = CliRunner().invoke(cli, ["catalogue", "--manifests", str(folder), "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    markdown = (tmp_path / "out" / "catalogue.md").read_text(encoding="utf-8")
    assert "| single listing | 1 |" in markdown and "Single-listing licences: listed_cells" in markdown


def test_each_dataset_is_summarised_once_by_its_weakest_evidence_and_audit_patterns_are_listed(tmp_path):
    """primary / secondary / single-listing / unverified, as the issue asks the catalogue to report."""
    folder = tmp_path / "datasets"
    own_pages = {"source": "https://zenodo.org/records/3835", "level": "primary", "quote": "images/<class>/*.jpg"}
    primary = manifest_dict(id="own_pages")
    primary["evidence"] = {**copy.deepcopy(primary["evidence"]), "layout": own_pages}
    write_manifest(folder, primary)
    write_manifest(folder, manifest_dict(id="loader_layout"))  # the factory's layout is read in a loader: secondary
    listed = manifest_dict(id="one_listing", source={"kind": "zenodo", "record": 3835, "files": ["fundus.zip"]})
    listed["evidence"] = {**copy.deepcopy(listed["evidence"]), "licence_single_listing": True,
                          "licence": {"source": "dataset-ninja/cells@0123456:src/settings.py", "level": "secondary"}}
    write_manifest(folder, listed)

    coverage = catalogue_coverage(folder, load_taxonomy())

    assert {t.name: t.dataset_ids for t in coverage.evidence} == {
        "primary": ["own_pages"], "secondary": ["loader_layout"], "single-listing": ["one_listing"],
        "unverified": [], "no evidence": []}
    assert coverage.audit["unquoted_file_keys"] == [
        "one_listing: source file 'fundus.zip' is quoted by no host or layout citation; quote where it was read"]
    markdown = CliRunner().invoke(cli, ["catalogue", "--manifests", str(folder)]).output
    assert "| primary | 1 |" in markdown and "| single-listing | 1 |" in markdown and "| unverified | 0 |" in markdown
    assert "## Audit patterns" in markdown and "- one_listing: source file 'fundus.zip'" in markdown


def test_command_prints_and_writes_markdown_json_and_chart(tmp_path):
    folder = catalogue(tmp_path / "datasets")
    summary = tmp_path / "summary.md"
    result = CliRunner().invoke(cli, ["catalogue", "--manifests", str(folder), "--out", str(tmp_path / "out"),
                                      "--summary", str(summary)])

    assert result.exit_code == 0, result.output
    assert "**3** dataset(s) of the paper's 410" in result.output
    assert "| segmentation | 1 | 0 (+1 without a count) | 84 |" in result.output
    assert "- modalities: computed tomography," in result.output
    markdown = (tmp_path / "out" / "catalogue.md").read_text(encoding="utf-8")
    assert summary.read_text(encoding="utf-8") == markdown
    written = json.loads((tmp_path / "out" / "catalogue.json").read_text(encoding="utf-8"))
    assert written["datasets"] == 3 and written["paper"]["datasets"] == paper_targets().datasets
    with Image.open(tmp_path / "out" / "catalogue.png") as chart:
        assert chart.format == "PNG" and chart.width > 1000
        colours = np.unique(np.asarray(chart.convert("RGB")).reshape(-1, 3), axis=0)
        assert len(colours) > 10  # bars and text, not a blank canvas


def test_compare_names_what_a_pull_request_changes(tmp_path):
    base = catalogue(tmp_path / "base")
    head = catalogue(tmp_path / "head")
    (head / "brain_mr.yaml").unlink()
    ct = manifest_dict(id="chest_ct", source={"kind": "zenodo", "record": 99}, license="CC0-1.0")
    ct["metadata"].update(modality="computed tomography", sub_modality="conventional computed tomography",
                          stain=None, specimen="human", specimen_subregion="chest", domain="radiology")
    write_manifest(head, ct)
    runner = CliRunner()
    assert runner.invoke(cli, ["catalogue", "--manifests", str(base), "--out", str(tmp_path / "b"),
                               "--quiet"]).exit_code == 0

    result = runner.invoke(cli, ["catalogue", "--manifests", str(head), "--compare", str(tmp_path / "b" /
                                                                                           "catalogue.json")])

    assert "## Changes against the base" in result.output
    assert "- added: chest_ct" in result.output and "- removed: brain_mr" in result.output
    assert "computed tomography 0 → 1" in result.output and "magnetic resonance imaging 1 → 0" in result.output
    assert "CC0-1.0 0 → 1" in result.output and "gaps filled: conventional computed tomography" in result.output


def test_unreadable_manifests_are_listed_and_bad_usage_is_exit_2(tmp_path):
    folder = catalogue(tmp_path / "datasets")
    (folder / "broken.yaml").write_text("id: broken\ntitle: [unclosed\n", encoding="utf-8")
    runner = CliRunner()
    result = runner.invoke(cli, ["catalogue", "--manifests", str(folder)])
    assert result.exit_code == 1 and "1 manifest(s) could not be read" in result.output
    assert "broken.yaml" in result.output and "**3** dataset(s)" in result.output
    missing = runner.invoke(cli, ["catalogue", "--manifests", str(tmp_path / "nowhere")])
    assert missing.exit_code == 2 and "no such folder" in missing.output
    (tmp_path / "not.json").write_text("[]", encoding="utf-8")
    bad = runner.invoke(cli, ["catalogue", "--manifests", str(folder), "--compare", str(tmp_path / "not.json")])
    assert bad.exit_code == 2 and "not a catalogue.json" in bad.output


def test_the_repository_catalogue_and_demo_report(repo_root):
    """What CI runs on every pull request."""
    for folder in ("manifests/datasets", "manifests/demo"):
        result = CliRunner().invoke(cli, ["catalogue", "--manifests", str(repo_root / folder), "--quiet"])
        assert result.exit_code == 0, result.output


def test_compare_refuses_devices_fifos_folders_huge_and_deep_files_in_one_line(tmp_path):
    """Issue 32, point 9: `--compare /dev/zero` read for ever, a FIFO hung in open, deep JSON recursed."""
    import os

    folder = catalogue(tmp_path / "datasets")
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "deep.json").write_text("[" * 200_000 + "]" * 200_000)
    with open(tmp_path / "huge.json", "wb") as handle:
        handle.truncate(200 * 1024**2)  # sparse: costs no disk
    expected = {"/dev/zero": "is not a regular file (a character device)", str(tmp_path / "fifo"): "(a FIFO)",
                str(tmp_path): "(a folder)", str(tmp_path / "deep.json"): "is not readable JSON (depth limit exceeded",
                str(tmp_path / "huge.json"): "holds 209,715,200 bytes, more than the 67,108,864 read"}
    for path, reason in expected.items():
        result = CliRunner().invoke(cli, ["catalogue", "--manifests", str(folder), "--compare", path])
        assert result.exit_code == 2, (path, result.output)
        line, = [line for line in result.output.splitlines() if line.startswith("Error:")]
        assert line.startswith(f"Error: --compare {path}: not a catalogue.json ({path} ") and reason in line, line
