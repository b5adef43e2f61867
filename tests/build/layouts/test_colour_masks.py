"""RGB masks whose colours are classes (`mask_colors`): exact colours, undeclared colours, JPEG colour masks."""
from __future__ import annotations

import numpy as np
import pytest
from PIL import Image
from pydantic import ValidationError
from scipy import ndimage
from support.build_manifests import make_manifest

from mmbu.build.layouts import read_mask, read_samples, region_mask

GREEN, RED = (0, 255, 0), (255, 0, 0)
BUS_LABELS = {"benign": "lesion without malignant features", "malignant": "lesion with malignant features"}
TASKS = ["mask_grounded_classification", "box_grounded_classification", "object_detection"]


def save(path, array, **options):
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(array).save(path, **options)


def bus_uclm(raw, stray=None):
    """BUS-UCLM breast ultrasound: a PNG image and a same-stem RGB PNG mask in a `masks` folder, benign lesions
    pure green [0, 255, 0], malignant ones pure red [255, 0, 0] on black (CAMMA-public/UltraSam@
    458ec794a246460b92ea3263ca8a80c67c1ac20e:datasets/datasets/BUS_UCLM.py: masks are the PNGs whose path holds
    'masks', paired by file stem, read with `channel_order="rgb"`). The converter fixes neither the image folder
    nor the file stems; `images/` and the stems below stand for them."""
    mask = np.zeros((30, 48, 3), np.uint8)
    mask[4:12, 5:15] = GREEN    # a benign lesion
    mask[18:26, 30:44] = RED    # a malignant one
    mask[20:24, 8:12] = GREEN   # a second benign region
    if stray is not None:
        mask[0, 0:3] = stray    # three pixels of an undeclared colour (an anti-aliased outline, a typo)
    save(raw / "BUS-UCLM" / "images" / "case_01.png", np.full((30, 48, 3), 90, np.uint8))
    save(raw / "BUS-UCLM" / "masks" / "case_01.png", mask)
    return mask


BUS_LAYOUT = {"kind": "image_mask_pairs", "images": "BUS-UCLM/images/*.png", "masks": "BUS-UCLM/masks/*.png",
              "mask_colors": {"0,255,0": "benign", "#ff0000": "malignant"}, "instances": "components"}


def test_each_declared_colour_is_a_class_and_the_label_mask_is_stored_for_the_later_steps(tmp_path):
    raw = tmp_path / "raw"
    mask = bus_uclm(raw)
    samples, exclusions = read_samples(make_manifest(BUS_LAYOUT, labels=BUS_LABELS, tasks=TASKS), raw, tmp_path / "cache")

    sample, = samples
    assert exclusions == [] and sample.source_path == "BUS-UCLM/images/case_01.png"
    assert [(r.label, r.box) for r in sample.regions] == [
        ("benign", (5.0, 4.0, 15.0, 12.0)), ("benign", (8.0, 20.0, 12.0, 24.0)), ("malignant", (30.0, 18.0, 44.0, 26.0))]
    assert sample.mask_path.parent == tmp_path / "cache" / "masks"  # never the RGB file: later steps read labels
    values = read_mask(sample.mask_path)
    assert set(np.unique(values)) == {0, 1, 2}
    for region in sample.regions:
        colour = GREEN if region.label == "benign" else RED
        x1, y1, x2, y2 = (int(v) for v in region.box)
        expected = np.zeros(values.shape, bool)
        expected[y1:y2, x1:x2] = (mask[y1:y2, x1:x2] == colour).all(axis=-1)
        assert np.array_equal(region_mask(values, region), expected)
    assert sample.provenance == {"mask BUS-UCLM/masks/case_01.png": "colours matched exactly"}


def test_an_undeclared_colour_excludes_the_mask_unless_other_colors_is_background(tmp_path):
    raw = tmp_path / "raw"
    bus_uclm(raw, stray=(255, 255, 0))
    manifest = make_manifest(BUS_LAYOUT, labels=BUS_LABELS, tasks=TASKS)
    samples, exclusions = read_samples(manifest, raw, tmp_path / "cache")
    assert samples == [] and [(e.item, e.reason) for e in exclusions] == [
        ("BUS-UCLM/masks/case_01.png", "3 pixels have colours mask_colors does not name: (255, 255, 0) (3 px); "
                                       "add them to mask_colors, or set other_colors: background")]

    lenient = make_manifest({**BUS_LAYOUT, "other_colors": "background"}, labels=BUS_LABELS, tasks=TASKS)
    samples, exclusions = read_samples(lenient, raw, tmp_path / "cache")
    assert exclusions == [] and len(samples[0].regions) == 3
    assert read_mask(samples[0].mask_path)[0, 0:3].tolist() == [0, 0, 0]
    assert samples[0].provenance["mask BUS-UCLM/masks/case_01.png"] == (
        "colours matched exactly; 3 pixels of other colours left as background: (255, 255, 0) (3 px)")


def test_a_jpeg_colour_mask_snaps_to_the_declared_colours_without_edge_specks(tmp_path):
    raw = tmp_path / "raw"
    truth = np.zeros((40, 56), np.uint8)
    truth[6:20, 6:30] = 1
    truth[20:34, 6:30] = 2  # red directly below green: the JPEG edge rings through yellows and browns
    rgb = np.zeros((40, 56, 3), np.uint8)
    rgb[truth == 1], rgb[truth == 2] = GREEN, RED
    save(raw / "images" / "a.png", np.zeros((40, 56), np.uint8))
    save(raw / "labels" / "a.jpg", rgb, quality=60)
    stored = np.asarray(Image.open(raw / "labels" / "a.jpg"))
    assert len({tuple(p) for p in stored.reshape(-1, 3)}) > 3  # the compression noise this test is about
    layout = {"kind": "mask_files", "image": "images/{stem}.png", "masks": ["labels/{stem}.jpg"], "objects": "values",
              "mask_colors": {"#00ff00": "benign", "#ff0000": "malignant"}}
    samples, exclusions = read_samples(make_manifest(layout, labels=BUS_LABELS, tasks=["mask_grounded_classification"]),
                                       raw, tmp_path / "cache")
    assert exclusions == []
    values = read_mask(samples[0].mask_path)
    by_label = {r.label: region_mask(values, r) for r in samples[0].regions}
    edge = ndimage.morphological_gradient(truth, size=(3, 3)) > 0  # within one pixel of a class boundary
    for label, value in (("benign", 1), ("malignant", 2)):
        found = by_label[label]
        assert ndimage.label(found)[1] == 1  # one piece: compression noise left no speck of either class
        assert not (found != (truth == value))[~edge].any()  # off the edges, exactly the drawn region
        assert (found & (truth == value)).sum() >= 0.95 * (truth == value).sum()
    assert samples[0].provenance["mask labels/a.jpg"].startswith("lossy colour mask: each pixel took the nearest")


@pytest.mark.parametrize("changes, message", [
    ({"mask_colors": {"0,255": "benign"}}, "'0,255' is not a colour; write '#rrggbb' or 'r,g,b'"),
    ({"mask_colors": {"0,256,0": "benign"}}, "'0,256,0' is not a colour"),
    ({"mask_colors": {"#00ff00": "benign", "0,255,0": "malignant"}}, "are the same colour"),
    ({"mask_values": {1: "benign"}}, "give mask_values .* or mask_colors .*, not both"),
    ({"background_color": "#ff0000"}, "is also a class colour"),
    ({"instances": "ids", "instance_label": "benign"}, "instances: ids reads values as object ids"),
])
def test_colour_fields_are_checked(changes, message):
    with pytest.raises(ValidationError, match=message):
        make_manifest({**BUS_LAYOUT, **changes}, labels=BUS_LABELS, tasks=TASKS)


def test_colour_labels_are_declared_for_the_vocabulary_check():
    layout = make_manifest(BUS_LAYOUT, labels=BUS_LABELS, tasks=TASKS).layout
    assert list(layout.declared_labels()) == [("layout.mask_colors.0,255,0", "benign"),
                                              ("layout.mask_colors.#ff0000", "malignant")]


def test_colours_that_only_separate_objects_make_one_object_per_connected_piece_of_a_colour(tmp_path):
    """BBBC039 masks tell nuclei apart by colour: 'if two nuclei touch, they are labeled with a different color'
    (broadinstitute/imaging-bbbc@0305cb4bc32411cc36aaf57ab7880fc2e4fb03c0:templates/BBBC039.html), so a colour
    repeats on nuclei that do not touch; images/<stem>.tif beside masks/<stem>.png (carpenterlab/unet4nuclei@
    5575e611f06abe2af97ccb50ba7b777f2c6b0cad:unet4nuclei/00-download-dataset.ipynb). An RGBA PNG, as saved."""
    raw = tmp_path / "raw"
    mask = np.zeros((30, 40, 4), np.uint8)
    mask[..., 3] = 255
    mask[2:10, 2:10, :3] = (200, 30, 30)    # nucleus 1
    mask[2:10, 10:16, :3] = (30, 200, 30)   # nucleus 2, touching 1 in another colour
    mask[20:26, 25:35, :3] = (200, 30, 30)  # nucleus 3, apart, in nucleus 1's colour
    save(raw / "masks" / "field_001.png", mask)  # the stem stands in for BBBC039's file names
    save(raw / "images" / "field_001.tif", np.full((30, 40), 900, np.uint16))
    layout = {"kind": "image_mask_pairs", "images": "images/*.tif", "masks": "masks/*.png",
              "instances": "components", "instance_label": "nucleus", "object_colors": True}
    samples, exclusions = read_samples(make_manifest(layout, labels={"nucleus": "cell nucleus"}, tasks=TASKS),
                                       raw, tmp_path / "cache")

    sample, = samples
    assert exclusions == []
    assert sorted(r.box for r in sample.regions) == [(2.0, 2.0, 10.0, 10.0), (10.0, 2.0, 16.0, 10.0),
                                                     (25.0, 20.0, 35.0, 26.0)]
    assert {r.label for r in sample.regions} == {"nucleus"}
    values = read_mask(sample.mask_path)
    masks = sorted((region_mask(values, r) for r in sample.regions), key=lambda m: np.argwhere(m)[0].tolist())
    assert [int(m.sum()) for m in masks] == [64, 48, 60]
    with pytest.raises(ValidationError, match="object_colors separates objects by colour"):
        make_manifest({**layout, "instances": "ids"}, labels={"nucleus": "cell nucleus"}, tasks=TASKS)
