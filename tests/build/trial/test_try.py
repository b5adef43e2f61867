"""`mmbu manifests try ID` end to end against a loopback host: a contributor's manifest whose pattern misses the
archive's top folder is told so per pattern, with the fetched tree and the one edit that mends it; mended, the same
command counts the samples per label and split, shows questions and draws them."""
from __future__ import annotations

import io

import numpy as np
import pytest
import yaml
from click.testing import CliRunner
from PIL import Image
from support.fetch_hosts import make_zip
from support.loopback import file_with_range

from mmbu.build.layouts.diagnose import layout_patterns, nearest_paths, top_folder_hint
from mmbu.cli import cli
from mmbu.curation.manifest.layout import YoloLayout


def png(value: int) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(np.full((24, 32, 3), value, np.uint8)).save(buffer, format="PNG")
    return buffer.getvalue()


# a smear archive that unpacks into its own top folder, as synapse-net.zip unpacks into synapse-net/
ARCHIVE = make_zip({f"blood-cells/{split}/{label}/{label}_{n}.png": png(40 * n)
                    for split in ("train", "test") for label in ("monocyte", "lymphocyte") for n in (1, 2)})


def manifest(url: str, folders: str, root: str = ".", count: int | None = None) -> dict:
    document = {
        "id": "smears", "title": "Synthetic smears", "license": "CC-BY-4.0", "citation": "Doe J. Test data. 2024.",
        "source": {"kind": "url", "files": [{"url": url}]},
        "tasks": ["ungrounded_classification"],
        "layout": {"kind": "folder_per_class", "root": root, "folders": folders, "images": "*.png"},
        "metadata": {"image_source": "test", "dataset_name": "smears", "domain": "Hematology",
                     "modality": "light microscopy", "sub_modality": "brightfield microscopy",
                     "specimen": "blood smear", "topic": "white blood cells", "original_task": "classification",
                     "url": "https://example.org/smears"},
        "labels": {"monocyte": "monocyte", "lymphocyte": "lymphocyte"},
        "questions": {"options_name": "white blood cell type", "n_options": 3},
        "curation": {"round": 1, "reviewers": ["tester"]},
    }
    if count is not None:
        cite = {"source": "https://example.org/smears", "level": "primary"}
        document["evidence"] = {"host": [cite], "licence": [cite], "layout": [cite],
                                "labels": {"provenance": "experts", "cites": [cite]},
                                "samples": {"count": count, "cites": [cite]}}
    return document


@pytest.fixture
def contributor(loopback, tmp_path):
    """(run(folders, root, count) -> click Result, the data folder): one manifest served by the loopback host."""
    loopback.add("GET", "/files/smears.zip", file_with_range(ARCHIVE))
    manifests = tmp_path / "repo" / "manifests" / "datasets"
    manifests.mkdir(parents=True)
    data = tmp_path / "data"

    def run(folders: str, root: str = ".", count: int | None = None, *extra: str):
        (manifests / "smears.yaml").write_text(
            yaml.safe_dump(manifest(f"{loopback.url}/files/smears.zip", folders, root, count)), encoding="utf-8")
        return CliRunner().invoke(cli, ["manifests", "try", "smears", "--manifests", str(manifests),
                                        "--data", str(data), *extra])

    return run, data


def test_a_pattern_that_misses_the_top_folder_is_shown_with_what_is_there_and_the_edit(contributor):
    run, _ = contributor
    result = run("{split}/{label}")

    assert result.exit_code == 1, result.output
    out = result.output
    assert "✓ fetch: fetched from url (1 file(s)" in out
    assert "✗ layout (folder_per_class): 0 sample(s)" in out
    assert "the fetched tree (files below each folder):\n  blood-cells/  (8 files)\n    test/  (4 files)\n" \
           "    train/  (4 files)" in out
    assert ("layout.root + folders + images '{split}/{label}/*.png' matches no file; the files sit under "
            "'blood-cells/': write 'blood-cells/{split}/{label}/*.png' (or '*/{split}/{label}/*.png' to accept any "
            "top folder); nearest: 'blood-cells/test/") in out
    assert "Traceback" not in out


def test_the_mended_manifest_counts_labels_per_split_shows_questions_and_draws_them(contributor, tmp_path):
    run, data = contributor
    assert run("{split}/{label}").exit_code == 1
    result = run("{split}/{label}", "blood-cells", None, "--out", str(tmp_path / "drawn"))

    assert result.exit_code == 0, result.output
    out = result.output
    assert "✓ fetch: already complete" in out  # the archive is not fetched again after the edit
    assert "✓ layout (folder_per_class): 8 sample(s)" in out
    for split in ("test", "train"):
        assert f"  {split}: lymphocyte → lymphocyte: 2\n  {split}: monocyte → monocyte: 2" in out
    assert "the layout's patterns" not in out
    assert "rows per task: ungrounded_classification 8" in out
    assert "[ungrounded_classification] blood-cells/test/" in out and "answer: " in out
    drawn = sorted((tmp_path / "drawn").glob("*.png"))
    assert len(drawn) == 2 and all(Image.open(p).size == (32, 24) for p in drawn)


def test_far_fewer_samples_than_the_evidence_states_shows_the_patterns_too(contributor):
    run, _ = contributor
    result = run("test/{label}", "blood-cells", 40)  # the evidence counts 40 images; the test split holds 4
    assert result.exit_code == 0, result.output
    assert "4 sample(s) of the 40 its evidence states" in result.output
    assert "layout.root + folders + images 'blood-cells/test/{label}/*.png' matches 4 file(s)" in result.output


def test_an_unknown_id_is_bad_usage_naming_the_closest_manifest(contributor, tmp_path):
    run, _ = contributor
    run("{split}/{label}")
    result = CliRunner().invoke(cli, ["manifests", "try", "smear", "--manifests",
                                      str(tmp_path / "repo" / "manifests" / "datasets")])
    assert result.exit_code == 2 and "did you mean 'smears'?" in result.output


def test_nearest_paths_compare_path_components_and_a_missing_top_folder_is_named():
    files = ["data/train/x.h5", "active_zones/train/a/b.h5", "notes/readme.txt"]
    assert nearest_paths("synapse-net/active_zones/{split}/{p}/{n}.h5", files, 1) == ["active_zones/train/a/b.h5"]
    assert top_folder_hint("synapse-net/active_zones/{split}/{p}/{n}.h5", files) == (
        "the fetched files have no top folder 'synapse-net/': write 'active_zones/{split}/{p}/{n}.h5'")


def test_the_split_of_a_sample_comes_from_its_file_or_its_array_key():
    from pathlib import Path

    from support.build_manifests import make_manifest

    from mmbu.build.layouts import Sample
    from mmbu.build.trial.run import split_of, split_templates

    medmnist = make_manifest({"kind": "arrays", "images": {"file": "pathmnist.npz", "key": "{split}_images"},
                              "labels": {"file": "pathmnist.npz", "key": "{split}_labels"}}, labels={"0": "monocyte"})
    item = Sample(sample_id="x", dataset_id="demo_marrow", source_path="pathmnist.npz", image_path=Path("x.png"),
                  part="key=test_images;index=3")
    assert split_of(item, split_templates(medmnist)) == "test"
    folders = make_manifest({"kind": "folder_per_class", "root": "CellData/OCT", "folders": "{split}/{label}",
                             "images": "*.jpeg"}, labels={"CNV": "monocyte"})
    image = item.model_copy(update={"source_path": "CellData/OCT/train/CNV/CNV-1016042-1.jpeg", "part": None})
    assert split_of(image, split_templates(folders)) == "train"
    assert split_of(image, split_templates(medmnist)) == "-"


def test_a_yolo_labels_folder_is_a_folder_pattern_and_a_labels_template_a_file_pattern():
    folder = YoloLayout(kind="yolo", images="images/*.png", labels="labels")
    template = YoloLayout(kind="yolo", images="**/{stem}.png", labels="**/yolov5/labels/{stem}.txt")
    assert ("layout.labels", "labels", True) in layout_patterns(folder)
    assert ("layout.labels", "**/yolov5/labels/{stem}.txt", False) in layout_patterns(template)
