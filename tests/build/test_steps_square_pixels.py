"""The manifest's `convert: square_pixels` reaches the converter through the build, and flipping it re-converts.

A DICOM dataset whose pixels are twice as tall as wide (Pixel Spacing 1.0 \\ 0.5 mm, stored 80 x 40):
with the switch on (the default) its PNGs are 80 x 80, with `square_pixels: false` they are the stored
80 x 40 grid, boxes and masks given on the stored grid stay where they are, and a rebuild after editing
the switch converts the images again (the options are part of each PNG's cache key).
"""
from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
from PIL import Image
from support.build_manifests import METADATA, make_manifest, write_taxonomy

sys.path.insert(0, str(Path(__file__).parent / "convert"))
import factories_dicom as fd  # noqa: E402

from mmbu.build.convert_resume import RESUME_FILE  # noqa: E402
from mmbu.build.layouts import read_samples  # noqa: E402
from mmbu.build.pipeline import BuildConfig, run_build  # noqa: E402
from mmbu.build.questions import place_items, task_items  # noqa: E402
from mmbu.build.steps import convert_options, convert_samples  # noqa: E402

ROWS, COLUMNS = 40, 80
TALL_PIXELS = {"PixelSpacing": [1.0, 0.5]}
CT_METADATA = METADATA | {"domain": "Radiology", "modality": "computed tomography",
                          "sub_modality": "conventional CT", "stain": None, "specimen_subregion": "chest",
                          "dataset_name": "Demo chest CT", "context": "chest CT"}


def _disc() -> np.ndarray:
    yy, xx = np.mgrid[0:ROWS, 0:COLUMNS]
    return ((yy + 0.5 - ROWS / 2) / 15) ** 2 + ((xx + 0.5 - COLUMNS / 2) / 30) ** 2 <= 1


def _write_ct(path: Path, value: int = 1000) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    stored = np.where(_disc(), value, 0).astype(np.uint16)
    ds = fd.ct_dataset(stored, slope=1.0, intercept=0.0, window=(500.0, 1000.0), attributes=TALL_PIXELS)
    return fd.save(ds, path)


@pytest.mark.parametrize(("convert", "expected"), [(None, True), ({"square_pixels": True}, True),
                                                   ({"square_pixels": False}, False)])
def test_the_manifest_switch_becomes_the_convert_option(convert, expected):
    manifest = make_manifest({"kind": "folder_per_class"}, convert=convert)
    assert manifest.convert.square_pixels is expected
    assert convert_options(manifest).square_pixels is expected
    assert convert_options(manifest, as_mask=True).square_pixels is expected  # masks follow their images


def test_switched_off_the_build_keeps_the_stored_grid_for_image_box_and_mask(tmp_path):
    raw = tmp_path / "raw"
    _write_ct(raw / "images" / "us1.dcm")
    inside = _disc()
    (raw / "masks").mkdir()
    Image.fromarray(inside.astype(np.uint8)).save(raw / "masks" / "us1.png")
    manifest = make_manifest({"kind": "image_mask_pairs", "images": "images/*.dcm", "masks": "masks/*.png",
                              "mask_values": {1: "gland"}},
                             labels={"gland": "gland"}, convert={"square_pixels": False},
                             tasks=["box_grounded_classification", "mask_grounded_classification"])
    samples, layout_exclusions = read_samples(manifest, raw)
    assert not layout_exclusions
    kept, conversions, dropped = convert_samples(samples, manifest, tmp_path / "work", "test")
    assert not dropped
    record = conversions[kept[0].sample_id].record
    assert record["params"]["square_pixels"]["applied"] is False and record["params"]["geometry"]["transforms"] == []
    placed, exclusions = place_items(task_items(kept, manifest), conversions, tmp_path / "roi")
    assert not exclusions

    with Image.open(conversions[kept[0].sample_id].png) as png:
        bright = np.asarray(png) > 127
    assert np.array_equal(bright, inside)  # the stored grid, pixel for pixel
    rows, columns = np.nonzero(inside.any(axis=1))[0], np.nonzero(inside.any(axis=0))[0]
    stored_box = [columns[0], rows[0], columns[-1] + 1, rows[-1] + 1]
    for row in placed:
        assert row.image_size == (COLUMNS, ROWS)
        assert [round(v) for v in row.boxes[0]] == stored_box
    (roi,) = [np.asarray(Image.open(p.mask)) > 0 for p in placed if p.task == "mask_grounded_classification"]
    assert np.array_equal(roi, inside)


def _repo(root: Path, square_pixels: bool | None) -> Path:
    """A repository with one folder-per-class DICOM dataset; `square_pixels` None leaves the field out."""
    for label, value in (("MON", 1000), ("LYT", 800)):
        for index in range(2):
            _write_ct(root / "demo" / label / f"{label.lower()}{index}.dcm", value - 100 * index)
    manifest = make_manifest({"kind": "folder_per_class"}, metadata=CT_METADATA,
                             convert=None if square_pixels is None else {"square_pixels": square_pixels})
    document = manifest.model_dump(mode="json", exclude_none=True)
    if square_pixels is None:
        document.pop("convert")  # an old manifest, written before the switch existed
    manifests = root / "manifests" / "datasets"
    manifests.mkdir(parents=True, exist_ok=True)
    path = manifests / f"{manifest.id}.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return path


def _pngs(root: Path) -> dict[str, tuple[tuple[int, int], str]]:
    """Converted image name -> (PNG size, cache key in its resume record)."""
    work = root / "data" / "work" / "demo_marrow"
    with sqlite3.connect(work / RESUME_FILE) as db:
        keys = dict(db.execute("SELECT path, key FROM png").fetchall())
    found = {}
    for png in sorted((work / "images").glob("*.png")):
        with Image.open(png) as image:
            found[png.name] = (image.size, keys[str(png)])
    return found


def test_flipping_the_switch_in_the_manifest_reconverts_the_images(tmp_path):
    manifest_path = _repo(tmp_path, square_pixels=None)
    # the four CTs are one picture at four intensities: copies to the duplicate check, which is not tested here
    config = BuildConfig(manifests_dir=manifest_path.parent, data_dir=tmp_path / "data", repo_root=tmp_path,
                         taxonomy_path=tmp_path / "taxonomy.yaml", duplicate_distance=None)
    write_taxonomy(tmp_path)

    first = run_build(config)
    assert first.exit_code == 0, (first.manifest_errors, first.failed)
    squared = _pngs(tmp_path)
    assert len(squared) == 4 and {size for size, _ in squared.values()} == {(80, 80)}

    document = yaml.safe_load(manifest_path.read_text(encoding="utf-8"))
    document["convert"] = {"square_pixels": False}
    manifest_path.write_text(yaml.safe_dump(document, sort_keys=False, allow_unicode=True), encoding="utf-8")
    second = run_build(config)
    assert second.exit_code == 0, second.failed
    assert second.datasets[0].ran == ["layout", "select", "convert", "rows", "hashes"]
    stored = _pngs(tmp_path)
    assert stored.keys() == squared.keys()  # same sample ids: the switch does not rename images
    assert {size for size, _ in stored.values()} == {(COLUMNS, ROWS)}
    assert all(stored[name][1] != squared[name][1] for name in stored)  # new cache keys

    assert run_build(config).datasets[0].ran == []  # unchanged again: nothing converted
    document["convert"] = {"square_pixels": True}  # explicitly on = the default: the first images' keys
    manifest_path.write_text(yaml.safe_dump(document, sort_keys=False, allow_unicode=True), encoding="utf-8")
    assert "convert" in run_build(config).datasets[0].ran
    assert _pngs(tmp_path) == squared
