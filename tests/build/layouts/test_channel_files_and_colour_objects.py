"""mask_files: one sample composed from per-channel files (`channels`), and per-object colour masks whose colour
carries no meaning (any pixel not of the background colour is the object).

The replica follows CELLULAR as torch-em's loader reads it (constantinpape/torch-em@6f71247c0bde24cb050bb25501ca61517ce08b7f:
torch_em/data/datasets/light_microscopy/cellular.py): `images/<field>_w1.TIF`, `_w2.TIF`, `_w3.TIF` (FITC, Texas Red,
transmitted light) and `masks/<field>/<class>/*.png`, one colour PNG per cell ("The masks are colored, but the color
varies inside one class, so it does not encode the class"; the loader takes `mask.max(axis=-1) > 0`). The pixels are
synthetic; the expected boxes and masks are written down from the rectangles drawn, not read back by the layout.
"""
from __future__ import annotations

import numpy as np
import pytest
import tifffile
from PIL import Image
from pydantic import ValidationError
from support.build_manifests import make_manifest

from mmbu.build.convert.dispatch import read_image
from mmbu.build.layouts import read_mask, read_samples, region_mask

TASKS = ["mask_grounded_classification", "box_grounded_classification", "object_detection"]
FIELD = "MFGTMPcx7_170702000001_A01f00d0"  # a synthetic field name in the MetaXpress style of the archive
H, W = 24, 32
CHANNEL_LAYOUT = {
    "kind": "mask_files",
    "image": "images/{field}_{channel}.TIF",
    "masks": ["masks/{field}/{class}/*.png"],
    "channels": {"part": "channel", "colors": {"w1": "#00ff00", "w2": "#ff0000", "w3": "#ffffff"}},
    "objects": "file",
    "label_part": "class",
}
LABELS = {"fed": "cell with basal autophagy", "unfed": "cell with activated autophagy"}
# cell -> (class, colour the archive happened to give it, rows, cols)
CELLS = {
    "cell_1.png": ("fed", (214, 39, 40), (2, 8), (3, 11)),
    "cell_2.png": ("fed", (31, 119, 180), (12, 20), (4, 9)),  # dark blue: grey level 105, under a 128 threshold
    "cell_7.png": ("unfed", (255, 127, 14), (5, 15), (18, 30)),
}


def channel_plane(index: int) -> np.ndarray:
    """A 16-bit plane whose values tell the channel apart (channel k holds k*1000 + a ramp)."""
    return (np.add.outer(np.arange(H), np.arange(W)) + 1000 * (index + 1)).astype(np.uint16)


def cellular(raw, *, drop_channel: str | None = None, mask_format: str = "PNG"):
    (raw / "images").mkdir(parents=True, exist_ok=True)
    for index, channel in enumerate(("w1", "w2", "w3", "w4")):  # w4: a channel the manifest does not ask for
        if channel != drop_channel:
            tifffile.imwrite(raw / "images" / f"{FIELD}_{channel}.TIF", channel_plane(index))
    for name, (label, colour, (r0, r1), (c0, c1)) in CELLS.items():
        rgb = np.zeros((H, W, 3), np.uint8)
        rgb[r0:r1, c0:c1] = colour
        path = raw / "masks" / FIELD / label / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if mask_format == "JPEG":
            Image.fromarray(rgb).save(path.with_suffix(".jpg"), format="JPEG", quality=95)
        else:
            Image.fromarray(rgb).save(path)


def expected_mask(rows, cols) -> np.ndarray:
    truth = np.zeros((H, W), bool)
    truth[rows[0]:rows[1], cols[0]:cols[1]] = True
    return truth


def test_per_channel_files_make_one_sample_and_each_colour_mask_file_is_one_object(tmp_path):
    raw = tmp_path / "raw"
    cellular(raw)
    samples, exclusions = read_samples(make_manifest(CHANNEL_LAYOUT, labels=LABELS, tasks=TASKS), raw,
                                       tmp_path / "cache")

    assert exclusions == []
    sample, = samples
    assert sample.source_path == f"images/{FIELD}_w1.TIF" and sample.part == "channels=w1,w2,w3"
    assert sample.image_size == (W, H)
    # the image: the three channel files stacked in the manifest's order, each named and coloured, dtype kept
    with tifffile.TiffFile(sample.image_path) as tiff:
        assert tiff.is_ome and tiff.series[0].axes == "CYX"
        stack = tiff.asarray()
        assert 'Name="w1"' in tiff.ome_metadata and 'Name="w3"' in tiff.ome_metadata
    assert stack.dtype == np.uint16 and [np.array_equal(stack[k], channel_plane(k)) for k in range(3)] == [True] * 3
    # the objects: one per mask file, whatever its colour, labelled by its class folder
    found = {r.instance.rsplit("/", 1)[-1]: r for r in sample.regions}
    assert set(found) == set(CELLS)
    ids = read_mask(sample.mask_path)
    for name, (label, _, rows, cols) in CELLS.items():
        assert found[name].label == label
        assert found[name].box == (float(cols[0]), float(rows[0]), float(cols[1]), float(rows[1]))
        assert np.array_equal(region_mask(ids, found[name]), expected_mask(rows, cols))


def test_the_composed_image_converts_as_a_fluorescence_blend_in_the_manifests_colours(tmp_path):
    raw = tmp_path / "raw"
    cellular(raw)
    sample, = read_samples(make_manifest(CHANNEL_LAYOUT, labels=LABELS, tasks=TASKS), raw, tmp_path / "cache")[0]
    converted = read_image(sample.image_path)
    channels = converted.params["channels"]
    assert [(c["name"], c["colour"]) for c in channels] == [("w1", "#00FF00"), ("w2", "#FF0000"), ("w3", "#FFFFFF")]
    assert converted.pixels.shape == (H, W, 3)


def test_a_sample_missing_a_channel_file_is_one_exclusion_naming_the_file(tmp_path):
    raw = tmp_path / "raw"
    cellular(raw, drop_channel="w2")
    samples, exclusions = read_samples(make_manifest(CHANNEL_LAYOUT, labels=LABELS, tasks=TASKS), raw)
    assert samples == []
    assert [(e.item, e.reason) for e in exclusions if e.item.startswith("images/")] == [
        (f"images/{FIELD}_w1.TIF", f"the sample misses its channel file(s) images/{FIELD}_w2.TIF")]


def test_jpeg_colour_object_masks_keep_a_dark_object_a_grey_threshold_would_lose(tmp_path):
    raw = tmp_path / "raw"
    cellular(raw, mask_format="JPEG")
    layout = {**CHANNEL_LAYOUT, "masks": ["masks/{field}/{class}/*.jpg"]}
    sample, = read_samples(make_manifest(layout, labels=LABELS, tasks=TASKS), raw)[0]
    found = {r.instance.rsplit("/", 1)[-1]: r.box for r in sample.regions}
    assert found["cell_2.jpg"] == (4.0, 12.0, 9.0, 20.0)  # (31, 119, 180): its grey level 105 is under 128
    assert "differ from the background colour by 128 or more" in sample.provenance[
        f"mask masks/{FIELD}/fed/cell_2.jpg"]


@pytest.mark.parametrize("change, message", [
    ({"channels": {"part": "chanel", "colors": {"w1": "#00ff00", "w2": "#ff0000"}}},
     "channels.part 'chanel' is not a named part of image"),
    ({"channels": {"part": "channel", "colors": {"w1": "#00ff00"}}}, "at least 2"),
    ({"channels": {"part": "channel", "colors": {"w1": "green", "w2": "#ff0000"}}}, "is not a colour"),
    ({"label_part": None, "label": "cell", "masks": ["masks/{field}/{channel}/*.png"]}, "cannot be a part of them"),
])
def test_channel_fields_are_checked(change, message):
    with pytest.raises(ValidationError, match=message):
        make_manifest({**CHANNEL_LAYOUT, **change}, labels=LABELS, tasks=TASKS)
