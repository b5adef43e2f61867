"""polygons, format geojson: QuPath-style FeatureCollections (PUMA) and y-up Kaibu files (HPA) drawn into masks."""
from __future__ import annotations

import json

import numpy as np
import pytest
import tifffile
from PIL import Image
from pydantic import ValidationError
from support.build_manifests import make_manifest

from mmbu.build.layouts import read_mask, read_samples, region_mask

TASKS = ["mask_grounded_classification", "box_grounded_classification", "object_detection"]
PUMA_LABELS = {"nuclei_tumor": "tumour cell nucleus", "nuclei_lymphocyte": "lymphocyte nucleus",
               "nuclei_stroma": "stromal cell nucleus"}


def rectangle(x1, y1, x2, y2):
    return [[x1, y1], [x2, y1], [x2, y2], [x1, y2], [x1, y1]]  # closed, as GeoJSON writes rings


def feature(geometry_type, coordinates, name=None, uid=None):
    found = {"type": "Feature", "geometry": {"type": geometry_type, "coordinates": coordinates},
             "properties": {"objectType": "annotation"}}
    if name is not None:
        found["properties"]["classification"] = {"name": name, "color": [255, 0, 0]}
    if uid is not None:
        found["id"] = uid
    return found


def write_geojson(path, features):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"type": "FeatureCollection", "features": features}), encoding="utf-8")


def puma(raw):
    """PUMA (Zenodo 15050523): `01_training_dataset_tif_ROIs/training_set_<primary|metastatic>_roi_<nnn>.tif`, RGBA
    TIFFs, with `01_training_dataset_geojson_nuclei/<roi>_nuclei.geojson` FeatureCollections whose features carry
    `properties.classification.name` (`nuclei_tumor`, `nuclei_lymphocyte`, ...) and Polygon or MultiPolygon
    geometries in the ROI's pixel coordinates, y down; one ROI is stored as `.tiff`
    (constantinpape/torch-em@6f71247c0bde24cb050bb25501ca61517ce08b7f:torch_em/data/datasets/histopathology/puma.py:
    URLs, NUCLEI_CLASS_DICT, `image[..., :-1]`, the `.tiff` retry; file names and the pixel-coordinate drawing with
    PIL ImageDraw: rajpurkarlab/ReX-MLE@477c834037be7e7acb5bdc612b5f1cf140d01e6f:
    rex-mle/rexmle/challenges/puma-track1-task1/prepare.py). The ROIs are 1024 pixels square; 40 here."""
    rois, notes = raw / "01_training_dataset_tif_ROIs", raw / "01_training_dataset_geojson_nuclei"
    rois.mkdir(parents=True)
    tifffile.imwrite(rois / "training_set_metastatic_roi_001.tif", np.full((40, 40, 4), 200, np.uint8))
    tifffile.imwrite(rois / "training_set_primary_roi_103.tiff", np.full((40, 40, 4), 180, np.uint8))
    tifffile.imwrite(rois / "training_set_primary_roi_002.tif", np.full((40, 40, 4), 160, np.uint8))
    write_geojson(notes / "training_set_metastatic_roi_001_nuclei.geojson", [
        feature("Polygon", [rectangle(2, 2, 12, 10), rectangle(5, 4, 9, 8)], "nuclei_tumor", "4b1e-a"),  # with a hole
        feature("MultiPolygon", [[rectangle(20, 2, 24, 6)], [rectangle(30, 2, 34, 6)]], "nuclei_lymphocyte", "4b1e-b"),
        feature("Point", [15, 15], "nuclei_lymphocyte", "4b1e-c"),          # a point is not an area
        feature("Polygon", [[[1, 30], [8, 30], [1, 30]]], "nuclei_tumor", "4b1e-d"),  # two points
        feature("Polygon", [rectangle(20, 20, 26, 26)], "nuclei_mystery", "4b1e-e"),
    ])
    write_geojson(notes / "training_set_primary_roi_103_nuclei.geojson", [
        feature("Polygon", [rectangle(10, 30, 14, 34)], "nuclei_stroma")])
    return rois


PUMA_LAYOUT = {"kind": "polygons", "format": "geojson", "images": "01_training_dataset_tif_ROIs/{roi}.tif*",
               "annotations": "01_training_dataset_geojson_nuclei/{roi}_nuclei.geojson",
               "label_property": "classification.name"}


def drawn(x1, y1, x2, y2, shape=(40, 40)):
    """What Pillow draws for an axis-aligned rectangle: both edges' pixels included."""
    mask = np.zeros(shape, bool)
    mask[y1:y2 + 1, x1:x2 + 1] = True
    return mask


def test_puma_features_become_objects_with_holes_and_multipolygon_parts_and_their_class(tmp_path):
    raw = tmp_path / "raw"
    puma(raw)
    samples, exclusions = read_samples(make_manifest(PUMA_LAYOUT, labels=PUMA_LABELS, tasks=TASKS), raw,
                                       tmp_path / "cache")

    metastatic, primary = samples
    assert metastatic.source_path == "01_training_dataset_tif_ROIs/training_set_metastatic_roi_001.tif"
    assert primary.source_path == "01_training_dataset_tif_ROIs/training_set_primary_roi_103.tiff"
    assert [(r.label, r.instance, r.box) for r in metastatic.regions] == [
        ("nuclei_tumor", "feature-4b1e-a", (2.0, 2.0, 13.0, 11.0)),
        ("nuclei_lymphocyte", "feature-4b1e-b", (20.0, 2.0, 35.0, 7.0))]
    ids = read_mask(metastatic.mask_path)
    ring = drawn(2, 2, 12, 10) & ~drawn(6, 5, 8, 7)  # the hole's inside is cleared, its outline stays
    assert np.array_equal(region_mask(ids, metastatic.regions[0]), ring)
    assert np.array_equal(region_mask(ids, metastatic.regions[1]), drawn(20, 2, 24, 6) | drawn(30, 2, 34, 6))
    assert [(r.label, r.box) for r in primary.regions] == [("nuclei_stroma", (10.0, 30.0, 15.0, 35.0))]
    reasons = {e.item.rsplit("#", 1)[-1]: e.reason for e in exclusions}
    assert reasons["feature-4b1e-c"] == "a Point geometry is not an area (Polygon or MultiPolygon)"
    assert reasons["feature-4b1e-d"] == "a polygon needs at least three points; this one has 2"
    assert reasons["feature-4b1e-e"] == "object label 'nuclei_mystery' is not in the manifest's label vocabulary"
    assert reasons["01_training_dataset_tif_ROIs/training_set_primary_roi_002.tif"].startswith("no annotation file")


def test_a_feature_without_the_label_property_and_a_file_that_is_not_geojson_are_one_sentence_each(tmp_path):
    raw = tmp_path / "raw"
    puma(raw)
    notes = raw / "01_training_dataset_geojson_nuclei"
    write_geojson(notes / "training_set_primary_roi_002_nuclei.geojson",
                  [feature("Polygon", [rectangle(1, 1, 5, 5)], None, "no-class")])
    (notes / "training_set_primary_roi_103_nuclei.geojson").write_text('{"type": "Topology"}', encoding="utf-8")
    samples, exclusions = read_samples(make_manifest(PUMA_LAYOUT, labels=PUMA_LABELS, tasks=TASKS), raw,
                                       tmp_path / "cache")
    assert [s.source_path.rsplit("/", 1)[1] for s in samples] == ["training_set_metastatic_roi_001.tif"]
    reasons = {e.item: e.reason for e in exclusions}
    assert reasons["01_training_dataset_tif_ROIs/training_set_primary_roi_002.tif#feature-no-class"] == (
        "the feature has no properties.classification.name to name its label")
    assert reasons["01_training_dataset_geojson_nuclei/training_set_primary_roi_103_nuclei.geojson"] == (
        "not GeoJSON: expected a FeatureCollection with a features list, a list of Features or a Feature")


def hpa(raw):
    """HPA cell segmentation (Zenodo 4665863, `hpa_dataset_v2.zip`): `hpa_dataset_v2/<train|valid|test>/<sample>/`
    holding `microtubules.png`, `protein.png`, `nuclei.png`, `er.png` and, outside `test`, `annotation.json`: a
    Kaibu FeatureCollection of Polygon cells whose y counts from the bottom edge, so the loader draws row
    `height - y` (constantinpape/torch-em@6f71247c0bde24cb050bb25501ca61517ce08b7f:
    torch_em/data/datasets/light_microscopy/hpa.py: `_process_image`, `_generate_binary_masks`). The sample
    folder names are not in the loader; `sample_a`, `sample_b` stand for them."""
    root = raw / "hpa_dataset_v2"
    for split, sample in (("train", "sample_a"), ("test", "sample_b")):
        folder = root / split / sample
        folder.mkdir(parents=True)
        for channel in ("microtubules", "protein", "nuclei", "er"):
            Image.fromarray(np.full((30, 50), 60, np.uint8)).save(folder / f"{channel}.png")
    write_geojson(root / "train" / "sample_a" / "annotation.json",
                  [{"type": "Feature", "geometry": {"type": "Polygon", "coordinates": [rectangle(4, 20, 14, 26)]},
                    "properties": {}}])  # y 20..26 from the bottom: rows 4..10 of a 30-row image


def test_hpa_y_up_coordinates_are_turned_into_rows_from_the_top(tmp_path):
    raw = tmp_path / "raw"
    hpa(raw)
    layout = {"kind": "polygons", "format": "geojson", "images": "hpa_dataset_v2/{split}/{sample}/microtubules.png",
              "annotations": "hpa_dataset_v2/{split}/{sample}/annotation.json", "fixed_label": "cell", "y_axis": "up"}
    samples, exclusions = read_samples(make_manifest(layout, labels={"cell": "cell"}, tasks=TASKS), raw,
                                       tmp_path / "cache")

    sample, = samples
    assert sample.source_path == "hpa_dataset_v2/train/sample_a/microtubules.png"
    region, = sample.regions
    assert region.box == (4.0, 4.0, 15.0, 11.0)
    assert np.array_equal(region_mask(read_mask(sample.mask_path), region), drawn(4, 4, 14, 10, shape=(30, 50)))
    assert [e.item for e in exclusions] == ["hpa_dataset_v2/test/sample_b/microtubules.png"]  # no annotation


@pytest.mark.parametrize("changes, message", [
    ({"label_property": None}, "geojson needs label_property .* or fixed_label"),
    ({"fixed_label": "cell"}, "give label_property or fixed_label, not both"),
    ({"images": None}, "geojson pairs annotation files with images"),
    ({"format": "labelme_json", "images": None}, "label_property and y_axis are for geojson"),
])
def test_geojson_fields_are_checked(changes, message):
    layout = {**PUMA_LAYOUT, **changes}
    with pytest.raises(ValidationError, match=message):
        make_manifest({k: v for k, v in layout.items() if v is not None}, labels={**PUMA_LABELS, "cell": "cell"},
                      tasks=TASKS)
