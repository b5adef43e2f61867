"""The release on disk: loadable both ways, croissant-valid, checksummed, with the contract's columns."""
from __future__ import annotations

import csv
import json
import subprocess

import datasets
import mlcroissant as mlc
import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
import yaml
from PIL import Image

from mmbu.build.release import CONFIGS, CONTRACT_COLUMNS, verify_sha256sums, write_release


def cache(out):
    """A fresh datasets cache per release dir: the user's cache must neither be used nor written."""
    return str(out.parent / f"hf-cache-{out.name}")


@pytest.fixture(scope="module")
def release(built):
    out = built["base"] / "release"
    summary = write_release(built["rows_by_task"], out, built["manifests"], built["build_info"],
                            exclusions=built["exclusions"])
    return out, summary


def test_every_config_has_shards_named_like_hf_and_the_contract_columns(release):
    out, summary = release
    assert set(summary.shards) == set(CONFIGS)
    for config in CONFIGS:
        shards = sorted((out / "data" / config).glob("*.parquet"))
        assert [s.name for s in shards] == ["test-00000-of-00001.parquet"]
        names = pq.read_schema(shards[0]).names
        assert names[: len(CONTRACT_COLUMNS)] == list(CONTRACT_COLUMNS)
        assert {"answer_aliases", "image_sha256", "task", "label"} <= set(names)


@pytest.mark.parametrize("config", CONFIGS)
def test_load_dataset_by_config_name_and_from_parquet_files(release, config):
    out, summary = release
    by_name = datasets.load_dataset(str(out), config, split="test", cache_dir=cache(out))
    from_files = datasets.load_dataset("parquet", data_files=[str(p) for p in summary.shards[config]], split="train",
                                       cache_dir=cache(out))
    assert len(by_name) == len(from_files) == summary.rows[config]
    assert isinstance(by_name.features["image"], datasets.Image)
    row = by_name[0]
    assert row["answer"] in row["options"] and row["sample_id"] == from_files[0]["sample_id"]
    assert row["image"].size == (row["image_width"], row["image_height"])
    if config == "mask_grounded_classification":
        mask = np.asarray(row["mask"])
        x1, y1, x2, y2 = row["boxes"][0]
        inside = np.argwhere(mask == 255)
        assert mask.shape == (row["image_height"], row["image_width"])
        assert (inside.min(axis=0).tolist(), (inside.max(axis=0) + 1).tolist()) == ([y1, x1], [y2, x2])
    else:
        assert row["mask"] is None


def test_boxes_and_masks_are_in_the_converted_png_frame(release):
    out, _ = release
    rows = datasets.load_dataset(str(out), "box_grounded_classification", split="test", cache_dir=cache(out))
    glands = rows.filter(lambda r: r["dataset_id"] == "demo_glands")
    boxes = sorted({tuple(r["boxes"][0]) for r in glands if r["label"] == "gland"})
    # source boxes (4, 4, 24, 20) and (40, 30, 60, 44) in a 64x48 image, converted to 32x24
    assert boxes == [(2, 2, 12, 10), (20, 15, 30, 22)]
    detect = datasets.load_dataset(str(out), "object_detection", split="test", cache_dir=cache(out))
    gland_rows = [r for r in detect if r["target"] == "gland"]
    assert gland_rows and all(r["answer"] in ("[2, 2, 12, 10]", "[20, 15, 30, 22]") for r in gland_rows)


def test_card_yaml_lists_configs_and_the_licence_table(release):
    out, _ = release
    text = (out / "README.md").read_text(encoding="utf-8")
    header = yaml.safe_load(text.split("---")[1])
    assert header["license"] == "other" and header["license_link"] == "LICENSE"
    assert [c["config_name"] for c in header["configs"]] == list(CONFIGS)
    assert header["configs"][0]["data_files"] == [
        {"split": "test", "path": "data/ungrounded_classification/test-*.parquet"}]
    assert "| `demo_glands` | Demo dataset | CC-BY-SA-4.0 |" in text
    assert "| `demo_marrow` | Demo dataset | CC-BY-4.0 | 12 |" in text


def test_card_tells_the_release_version_from_the_toolkit_version_and_cites_mmbu(built, tmp_path):
    info = {**built["build_info"], "toolkit_version": "0.2.0", "inputs_hash": "ab12" * 16}
    out = tmp_path / "release"
    write_release(built["rows_by_task"], out, built["manifests"], info, version="1.3.0")
    text = " ".join((out / "README.md").read_text(encoding="utf-8").split())
    assert "# MMBU (rebuilt), release 1.3.0" in text
    assert "**1.3.0** is the version of this data release" in text and "**0.2.0** is the version of the MMBU toolkit" in text
    assert "ab12" not in text  # the inputs hash covers the data folder's paths: it stays in build_info.json
    assert "eprint = {2606.06696}" in text and "D'Cunha, Ryan and others" in text  # the paper, as arXiv lists it


def test_croissant_validates_with_mlcroissant_and_pins_every_shard(release):
    out, summary = release
    document = json.loads((out / "croissant.json").read_text(encoding="utf-8"))
    dataset = mlc.Dataset(jsonld=out / "croissant.json")  # raises ValidationError on an invalid file
    assert dataset.metadata.name == "MMBU-rebuilt"
    assert not dataset.metadata.ctx.issues.errors and not dataset.metadata.ctx.issues.warnings
    files = {d["contentUrl"]: d["sha256"] for d in document["distribution"] if d["@type"] == "cr:FileObject"}
    sums = dict(line.split("  ")[::-1] for line in (out / "SHA256SUMS").read_text().splitlines())
    assert files and all(sums[name] == digest for name, digest in files.items())
    assert {d["name"] for d in document["prov:wasDerivedFrom"]} == {"Demo dataset"}
    assert len(document["prov:wasDerivedFrom"]) == 2
    records = list(dataset.records("ungrounded_classification"))
    assert len(records) == summary.rows["ungrounded_classification"]
    image = records[0]["ungrounded_classification/image"]  # mlcroissant decodes the PNG bytes
    assert isinstance(image, Image.Image) and image.format == "PNG" and image.size == (32, 24)


def test_croissant_list_columns_are_arrays_and_boxes_load_as_integers(release):
    """Croissant 1.1 §Field: a field whose values are lists says `isArray` (and `arrayShape`), and its `dataType` is
    the type of the items; Appendix 1's @context maps `isArray`/`arrayShape` to cr: (without them the keys expand to
    schema.org and readers ignore them). Before, `boxes` was an `sc:Text` scalar and mlcroissant turned the box
    [333, 240, 351, 269] into four strings of 333, 240, 351 and 269 zero bytes."""
    out, _ = release
    document = json.loads((out / "croissant.json").read_text(encoding="utf-8"))
    assert document["@context"]["isArray"] == "cr:isArray" and document["@context"]["arrayShape"] == "cr:arrayShape"
    for record_set in document["recordSet"]:
        fields = {f["@id"].split("/", 1)[1]: f for f in record_set["field"]}
        assert fields["boxes"]["dataType"] == "sc:Integer" and fields["boxes"]["isArray"] is True
        assert fields["boxes"]["arrayShape"] == "-1,4"
        for column in ("options", "answer_aliases"):
            assert fields[column]["dataType"] == "sc:Text" and fields[column]["isArray"] is True
        assert not any(f.get("isArray") for name, f in fields.items() if name not in ("boxes", "options",
                                                                                       "answer_aliases"))
    dataset = mlc.Dataset(jsonld=out / "croissant.json")
    assert not dataset.metadata.ctx.issues.errors and not dataset.metadata.ctx.issues.warnings
    for config in ("box_grounded_classification", "object_detection"):
        shard = pq.read_table(out / "data" / config / "test-00000-of-00001.parquet", columns=["sample_id", "boxes"])
        expected = dict(zip(shard["sample_id"].to_pylist(), shard["boxes"].to_pylist()))
        records = list(dataset.records(config))
        loaded = {r[f"{config}/sample_id"].decode(): [list(map(int, box)) for box in r[f"{config}/boxes"]]
                  for r in records}
        assert loaded == expected
        assert all(type(v) is int for r in records for box in r[f"{config}/boxes"] for v in box)
    ungrounded = next(iter(dataset.records("ungrounded_classification")))
    assert ungrounded["ungrounded_classification/boxes"] is None


def test_croissant_sources_sharing_a_homepage_stay_two_sources(built, tmp_path):
    """JSON-LD 1.1 §3.3 (node identifiers): objects with the same `@id` are one node. Before, each
    `prov:wasDerivedFrom` entry took its homepage as `@id`, so the demo's two pydicom datasets
    (demo_mri_body_region and demo_mri_liver_overlay, both https://github.com/pydicom/pydicom) became one source
    with two names and two citations, and no reader could tell which citation went with which dataset."""
    import rdflib

    homepage = "https://github.com/pydicom/pydicom"
    manifests = [m.model_copy(update={"homepage": homepage}) for m in built["manifests"]]
    out = tmp_path / "shared-homepage"
    write_release(built["rows_by_task"], out, manifests, built["build_info"])
    document = json.loads((out / "croissant.json").read_text(encoding="utf-8"))
    sources = document["prov:wasDerivedFrom"]
    ids = [s["@id"] for s in sources if "@id" in s]
    assert len(ids) == len(set(ids))
    graph = rdflib.Graph().parse(data=json.dumps(document), format="json-ld", base=out.as_uri() + "/")
    schema = rdflib.Namespace("https://schema.org/")
    nodes = set(graph.objects(None, rdflib.URIRef("http://www.w3.org/ns/prov#wasDerivedFrom")))
    assert len(nodes) == 2
    assert sorted(str(graph.value(node, schema.license)) for node in nodes) == [
        "https://spdx.org/licenses/CC-BY-4.0.html", "https://spdx.org/licenses/CC-BY-SA-4.0.html"]
    assert all(len(list(graph.objects(node, schema.identifier))) == 1 for node in nodes)
    assert [s["identifier"] for s in sources] == ["demo_glands", "demo_marrow"]  # the rows' dataset_id
    assert all(s["url"] == homepage for s in sources)


def test_sha256sums_cover_every_file_and_sha256sum_agrees(release):
    out, _ = release
    assert verify_sha256sums(out) == []
    result = subprocess.run(["sha256sum", "--check", "--quiet", "SHA256SUMS"], cwd=out, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    listed = {line.split("  ")[1] for line in (out / "SHA256SUMS").read_text().splitlines()}
    assert {"README.md", "croissant.json", "build_info.json", "exclusions.csv", "LICENSE",
            "stats/rows_per_modality.png"} <= listed
    (out / "LICENSE").write_text("tampered")
    assert verify_sha256sums(out) == ["LICENSE: checksum differs"]


def test_build_info_and_exclusions(release, built):
    out, summary = release
    info = json.loads((out / "build_info.json").read_text())
    assert info["seeds"] == {"questions": built["build_info"]["seeds"]["questions"]}
    assert info["taxonomy_sha256"] == built["taxonomy"].content_hash
    assert info["packages"]["pandera"] and info["rows"] == summary.rows
    with (out / "exclusions.csv").open(encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert list(rows[0]) == ["dataset_id", "sample_id", "item", "stage", "reason", "duplicate_of", "distance"]
    assert any(r["item"] == "XYZ/stray.png" and r["stage"] == "layout" for r in rows)


def test_statistics_summary_and_plots(release):
    out, summary = release
    stats = json.loads((out / "stats" / "summary.json").read_text())
    assert stats["rows"] == sum(summary.rows.values())
    assert stats["per_modality"] == {"digital pathology": stats["rows"] - 12, "light microscopy": 12}
    assert stats["images"] == 12 + 3 and stats["images_per_modality"] == {"light microscopy": 12,
                                                                          "digital pathology": 3}
    for name in ("rows_per_task.png", "rows_per_modality.png", "rows_per_sub_modality.png"):
        with Image.open(out / "stats" / name) as image:
            assert image.format == "PNG" and image.width > 600


def test_rebuild_is_byte_identical_in_data_and_replaces_atomically(release, built):
    out, summary = release
    before = {p.name: p.read_bytes() for config in CONFIGS for p in (out / "data" / config).glob("*.parquet")}
    again = write_release(built["rows_by_task"], out, built["manifests"], built["build_info"],
                          exclusions=built["exclusions"])
    after = {p.name: p.read_bytes() for config in CONFIGS for p in (out / "data" / config).glob("*.parquet")}
    assert before == after and again.rows == summary.rows
    assert [p.name for p in out.parent.iterdir() if p.name.startswith(f".{out.name}")] == []


def test_small_shard_limit_splits_configs(built):
    out = built["base"] / "sharded"
    summary = write_release(built["rows_by_task"], out, built["manifests"], built["build_info"],
                            max_shard_bytes=2_000)
    shards = summary.shards["ungrounded_classification"]
    assert len(shards) > 1 and shards[-1].name == f"test-{len(shards) - 1:05d}-of-{len(shards):05d}.parquet"
    loaded = datasets.load_dataset(str(out), "ungrounded_classification", split="test", cache_dir=cache(out))
    assert len(loaded) == 12


def test_a_failed_write_leaves_the_previous_release_untouched(release, built):
    out, _ = release
    before = (out / "SHA256SUMS").read_bytes()
    broken = {"ungrounded_classification": built["rows_by_task"]["ungrounded_classification"].drop(columns="answer")}
    with pytest.raises(ValueError, match="lack the column"):
        write_release(broken, out, built["manifests"], built["build_info"])
    assert (out / "SHA256SUMS").read_bytes() == before
    assert [p.name for p in out.parent.iterdir() if ".tmp-" in p.name] == []


def test_rows_with_unusable_images_are_excluded_and_empty_configs_left_out(built, tmp_path):
    rows = built["rows_by_task"]["ungrounded_classification"].copy()
    rows["image"] = rows["image"].astype(object)
    rows.loc[0, "image"] = str(tmp_path / "gone.png")
    rows.loc[1, "image"] = b"GIF89a not a png"
    out = tmp_path / "partial"
    summary = write_release({"ungrounded_classification": rows}, out, built["manifests"], built["build_info"])
    assert summary.rows == {"ungrounded_classification": len(rows) - 2}
    reasons = sorted(e.reason for e in summary.exclusions)
    assert "gone.png cannot be read (No such file or directory)" in reasons[0]
    assert reasons[1] == "the image is not a PNG"
    header = yaml.safe_load((out / "README.md").read_text(encoding="utf-8").split("---")[1])
    assert [c["config_name"] for c in header["configs"]] == ["ungrounded_classification"]
    assert not (out / "data" / "object_detection").exists()
    with (out / "exclusions.csv").open(encoding="utf-8") as handle:
        assert sum(r["stage"] == "release" for r in csv.DictReader(handle)) == 2
    with pytest.raises(ValueError, match="unknown task config"):
        write_release({"segmentation": rows}, tmp_path / "bad", built["manifests"], built["build_info"])


def test_rows_that_went_through_parquet_are_written_the_same(built, tmp_path):
    """The pipeline stores each dataset's rows as Parquet; lists come back as numpy arrays."""
    direct, stored = {}, {}
    for config in ("ungrounded_classification", "object_detection"):
        frame = built["rows_by_task"][config].drop(columns=["mask"])
        frame.to_parquet(tmp_path / f"{config}.parquet", index=False)
        direct[config] = frame
        stored[config] = pd.read_parquet(tmp_path / f"{config}.parquet")
    assert isinstance(stored["object_detection"].iloc[0]["options"], np.ndarray)
    a = write_release(direct, tmp_path / "a", built["manifests"], built["build_info"])
    b = write_release(stored, tmp_path / "b", built["manifests"], built["build_info"])
    for config in direct:
        assert [p.read_bytes() for p in a.shards[config]] == [p.read_bytes() for p in b.shards[config]]
