"""Hostile values in manifests, cards and data folders (issue 32, points 4 and 6): each is one clear line, the
promised exit code and the valid datasets beside it still built; nothing blows up in memory."""
from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import pytest
import yaml
from support.bounded_run import GIB_KIB, run_mmbu
from support.build_manifests import make_manifest, write_png
from support.build_repo import config_for, make_repo

from mmbu.build.layouts import read_samples
from mmbu.build.pipeline import run_build
from mmbu.core.yaml_io import ALIAS_EXPANSION_LIMIT, dump_yaml, parse_front_matter, parse_yaml
from mmbu.curation.manifest.validate import validate_files
from mmbu.taxonomy import load_taxonomy

REPO = Path(__file__).resolve().parents[2]
DEMO_MANIFEST = REPO / "manifests" / "demo" / "demo_fundus_skimage.yaml"


def billion_laughs(levels: int = 9) -> str:
    """The classic alias bomb: each level an anchored list of nine aliases of the level below (9^9 leaves)."""
    lines = ["l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    for level in range(1, levels):
        lines.append(f"l{level}: &l{level} [" + ", ".join([f"*l{level - 1}"] * 9) + "]")
    return "\n".join(lines) + "\n"


# --- point 4: YAML alias bombs -----------------------------------------------------------------------------------

def test_an_alias_bomb_is_refused_before_anything_walks_it():
    with pytest.raises(yaml.YAMLError, match=r"aliases expand .* more than the 100000 extra nodes allowed"):
        parse_yaml(billion_laughs())
    with pytest.raises(yaml.YAMLError, match="recursive structure"):
        parse_yaml("a: &a [1, *a]\n")
    # anchors for shared defaults, the reason aliases exist, still read
    shared = "d: &d {x: 1, y: [1, 2]}\n" + "".join(f"e{i}: {{<<: *d, z: {i}}}\n" for i in range(100))
    assert parse_yaml(shared)["e99"] == {"x": 1, "y": [1, 2], "z": 99}
    assert ALIAS_EXPANSION_LIMIT == 100_000


def test_an_alias_bomb_manifest_is_one_line_small_and_the_valid_manifest_beside_it_passes(tmp_path):
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(DEMO_MANIFEST.read_text().replace("id: demo_fundus_skimage", "id: bomb") + billion_laughs()
                    .replace("l0:", "x_l0:"))  # extra keys: the model would otherwise refuse them, walking the bomb
    good = tmp_path / DEMO_MANIFEST.name
    good.write_text(DEMO_MANIFEST.read_text())

    result = run_mmbu("manifests", "validate", bomb, good, cwd=REPO)

    assert result.returncode == 1 and "Traceback" not in result.output
    lines = [line for line in result.stderr.splitlines() if line.startswith(str(tmp_path))]
    assert len(lines) == 1 and lines[0].startswith(f"{bomb}: (file): not valid YAML: aliases expand"), lines
    assert result.peak_kib < GIB_KIB // 2, f"peak {result.peak_kib // 1024} MiB"  # 3.4 GiB before


def test_a_dataset_card_alias_bomb_is_an_exclusion_and_the_labels_come_from_the_manifest(tmp_path):
    import io

    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq
    from PIL import Image

    raw = tmp_path / "raw"
    raw.mkdir()
    encoded = io.BytesIO()
    Image.fromarray(np.full((8, 8), 9, np.uint8)).save(encoded, format="PNG")
    pq.write_table(pa.table({"image": pa.array([encoded.getvalue()], pa.binary()), "label": pa.array([1])}),
                   raw / "train.parquet")
    (raw / "README.md").write_text("---\n" + billion_laughs() + "dataset_info: *l8\n---\n# card\n")
    layout = {"kind": "parquet", "files": "*.parquet", "label_column": "label", "card": "README.md"}

    samples, exclusions = read_samples(make_manifest(layout, labels={"1": "erythroblast"}), raw, tmp_path / "cache")

    assert [s.label for s in samples] == ["1"]
    assert [(e.item, e.reason[:75]) for e in exclusions] == [
        ("README.md", "the dataset card's YAML header cannot be read (aliases expand 29 written no")]
    assert parse_front_matter("---\na: 1\n---\ntext") == {"a": 1} and parse_front_matter("no header") is None


# --- point 6: every manifest value is a clear error ---------------------------------------------------------------

def _demo_document() -> dict:
    return yaml.safe_load(DEMO_MANIFEST.read_text())


def test_a_licence_expression_missing_an_operand_is_one_line_in_validate_and_build(tmp_path):
    document = _demo_document() | {"id": "typo", "license": "MIT AND"}
    (tmp_path / "typo.yaml").write_text(yaml.safe_dump(document))
    result = run_mmbu("manifests", "validate", tmp_path / "typo.yaml", DEMO_MANIFEST, cwd=REPO)
    assert result.returncode == 1 and "Traceback" not in result.output
    assert (f"{tmp_path / 'typo.yaml'}: license: 'MIT AND' is not a valid SPDX expression (AND requires two or more "
            "licenses as in: MIT AND BSD)") in result.stderr

    manifests = make_repo(tmp_path / "repo")
    text = (manifests / "nuclei.yaml").read_text().replace("license: CC-BY-4.0", "license: MIT AND")
    (manifests / "nuclei.yaml").write_text(text)
    report = run_build(config_for(tmp_path / "repo"))
    assert report.exit_code == 1 and [o.dataset_id for o in report.datasets if o.ok] == ["cells"]
    assert any("'MIT AND' is not a valid SPDX expression" in message for message in report.manifest_errors)


def test_rich_markup_in_a_manifest_value_is_printed_as_written(tmp_path):
    manifests = make_repo(tmp_path)
    text = (manifests / "nuclei.yaml").read_text().replace("license: CC-BY-4.0", "license: '[/] [bold]x'")
    (manifests / "nuclei.yaml").write_text(text)

    result = run_mmbu("build", "--manifests", manifests, "--data", tmp_path / "data", cwd=tmp_path, timeout=300)

    assert result.returncode == 1 and "Traceback" not in result.output, result.output[-3000:]
    assert "'[/] [bold]x' is not a valid SPDX expression" in result.stderr
    assert "release " in result.stderr  # the summary was printed to its end
    assert (tmp_path / "data" / "release" / "SHA256SUMS").is_file()


def test_a_raw_folder_that_is_a_file_is_one_sentence_and_exit_2(tmp_path):
    manifests = make_repo(tmp_path)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "raw").write_text("not a folder")
    for command in ("build", "fetch"):
        result = run_mmbu(command, "--manifests", manifests, "--data", tmp_path / "data", cwd=tmp_path)
        assert result.returncode == 2 and "Traceback" not in result.output
        assert result.stderr.strip().splitlines() == [
            f"Error: cannot write {tmp_path / 'data' / 'raw'}: a file is where a folder is needed (the build and the "
            "fetch keep their files in it); move it away or choose another --data"]


def test_a_coco_box_of_infinity_on_an_image_of_undeclared_size_costs_that_box(tmp_path):
    raw = tmp_path / "raw"
    write_png(raw / "a.png", size=(100, 80))
    (raw / "ann.json").write_text(json.dumps({
        "images": [{"id": 1, "file_name": "a.png", "width": math.inf, "height": None}],
        "categories": [{"id": 1, "name": "LYT"}],
        "annotations": [{"id": 10, "image_id": 1, "category_id": 1, "bbox": [10, 20, math.inf, 15]},
                        {"id": 11, "image_id": 1, "category_id": 1, "bbox": [math.nan, 20, 3, 15]},
                        {"id": 12, "image_id": 1, "category_id": 1, "bbox": [10, 20, 30, 15]}]}))
    manifest = make_manifest({"kind": "coco", "annotations": "ann.json"}, tasks=["object_detection"])

    samples, exclusions = read_samples(manifest, raw)

    assert [[r.box for r in s.regions] for s in samples] == [[(10.0, 20.0, 40.0, 35.0)]]
    assert sorted((e.item, e.reason) for e in exclusions) == [
        ("a.png#ann-10", "box [10.0, 20.0, inf, 35.0] holds a number that is not finite"),
        ("a.png#ann-11", "box [nan, 20.0, nan, 35.0] holds a number that is not finite")]


HOSTILE_VALUES = ["[/]", "[bold red]x[/]", "MIT AND", "\x00", "\x1b[31m", "\r# forged", "inf", math.inf, math.nan,
                  -1, 10 ** 30, 1e308 * 10, "", "../../../etc/passwd", "/etc/passwd", "~/x", "*.json", "%s%n%x",
                  "a" * 5000, None, [], {}, [[[]]], {"a": {"b": None}}, True, "\u202e", "<script>x</script>",
                  "=cmd|' /C calc'!A0"]


def _leaves(node, path=()):
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _leaves(value, (*path, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _leaves(value, (*path, index))
    yield path


def _replaced(document, path, value):
    changed = copy.deepcopy(document)
    if not path:
        return value
    node = changed
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    return changed


def test_every_manifest_field_given_hostile_values_is_a_problem_or_valid_never_a_crash(tmp_path):
    """Fuzz: each field of a valid manifest (and the document itself) replaced by each hostile value."""
    document = _demo_document()
    paths = []
    for number, path in enumerate(_leaves(document)):
        for index, value in enumerate(HOSTILE_VALUES):
            target = tmp_path / f"m{number}_{index}.yaml"
            fuzzed = _replaced(document, path, value)
            if isinstance(fuzzed, dict) and path != ("id",):
                fuzzed["id"] = target.stem
            target.write_text(dump_yaml(fuzzed))  # libyaml's emitter: PyYAML's own took 2/3 of this test
            paths.append(target)
    taxonomy = load_taxonomy()

    report = validate_files(paths, taxonomy)  # raises nothing

    assert len(report.files) == len(paths) > 1000
    assert not [p for p in report.problems if "unexpected" in p.reason], \
        [str(p) for p in report.problems if "unexpected" in p.reason][:5]
    assert all("\n" not in str(problem) for problem in report.problems)
    assert len(report.manifests) > len(paths) // 5  # many hostile values are plain text, and valid
