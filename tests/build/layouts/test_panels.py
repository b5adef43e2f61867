"""image_mask_pairs with `panels`: one image file holding its image in one panel and its mask in another.

The replica follows DeepLIIF as torch-em's loader reads it (constantinpape/torch-em@6f71247c0bde24cb050bb25501ca61517ce08b7f:
torch_em/data/datasets/histopathology/deepliif.py): six panels of one region side by side in one PNG, "the IHC input, the
hematoxylin channel and the multiplex immunofluorescence modalities (mpIF DAPI, mpIF Lap2 and the mpIF marker), followed
by the segmentation mask", which "marks cells with positive protein expression in red and negative cells in blue" with
"a green boundary" around each cell (`np.split(imageio.imread(image_path)[..., :3], 6, axis=1)`). The pixels are
synthetic; the expected boxes and masks are the rectangles drawn, written down, not read back by the layout.
"""
from __future__ import annotations

import numpy as np
import pytest
from PIL import Image
from pydantic import ValidationError
from support.build_manifests import make_manifest

from mmbu.build.layouts import read_mask, read_samples, region_mask

TASKS = ["mask_grounded_classification", "box_grounded_classification", "object_detection"]
P = 16  # panel side (DeepLIIF's are 512)
LAYOUT = {
    "kind": "image_mask_pairs",
    "images": "DeepLIIF_Testing_Set/*.png",
    "panels": {"across": 6, "image": 1, "mask": 6},
    "mask_colors": {"#ff0000": "positive", "#0000ff": "negative"},
    "other_colors": "background",  # the green boundaries around the cells
    "instances": "components",
}
LABELS = {"positive": "cell with positive expression", "negative": "cell with negative expression"}
# cell interiors in the mask panel: (label, colour, rows, cols)
CELLS = [("positive", (255, 0, 0), (2, 6), (2, 7)), ("negative", (0, 0, 255), (9, 14), (8, 13)),
         ("positive", (255, 0, 0), (10, 15), (1, 4))]


def ihc_panel() -> np.ndarray:
    return np.stack([np.add.outer(np.arange(P) * 5, np.arange(P) * 3) % 256] * 3, axis=-1).astype(np.uint8)


def deepliif(raw, name="Lung_0001.png", fmt="PNG", width=6 * P):
    panels = [ihc_panel()] + [np.full((P, P, 3), 40 * k, np.uint8) for k in range(1, 5)]
    mask = np.zeros((P, P, 3), np.uint8)
    for _, colour, (r0, r1), (c0, c1) in CELLS:
        mask[r0 - 1:r1 + 1, c0 - 1:c1 + 1] = (0, 255, 0)  # the boundary ...
        mask[r0:r1, c0:c1] = colour                       # ... around the interior
    picture = np.concatenate([*panels, mask], axis=1)[:, :width]
    path = raw / "DeepLIIF_Testing_Set" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(picture).save(path, format=fmt, **({"quality": 95} if fmt == "JPEG" else {}))
    return path


def test_the_image_panel_is_the_sample_and_the_mask_panel_its_objects(tmp_path):
    raw = tmp_path / "raw"
    deepliif(raw)
    samples, exclusions = read_samples(make_manifest(LAYOUT, labels=LABELS, tasks=TASKS), raw, tmp_path / "cache")

    assert exclusions == []
    sample, = samples
    assert sample.source_path == "DeepLIIF_Testing_Set/Lung_0001.png" and sample.part == "panel=1"
    assert sample.image_size == (P, P)
    assert np.array_equal(np.asarray(Image.open(sample.image_path)), ihc_panel())  # the first panel, losslessly
    expected = {(float(c0), float(r0), float(c1), float(r1)): (label, rows, cols)
                for label, _, rows, cols in CELLS for (r0, r1), (c0, c1) in [(rows, cols)]}
    assert sorted(r.box for r in sample.regions) == sorted(expected)
    ids = read_mask(sample.mask_path)
    for region in sample.regions:
        label, (r0, r1), (c0, c1) = expected[region.box]
        truth = np.zeros((P, P), bool)
        truth[r0:r1, c0:c1] = True
        assert region.label == label and np.array_equal(region_mask(ids, region), truth)
    assert "left as background" in sample.provenance["mask"]  # the green boundary pixels, counted


def test_a_jpeg_files_mask_panel_snaps_to_the_declared_colours(tmp_path):
    raw = tmp_path / "raw"
    deepliif(raw, name="Lung_0002.jpg", fmt="JPEG")
    layout = {**LAYOUT, "images": "DeepLIIF_Testing_Set/*.jpg"}
    sample, = read_samples(make_manifest(layout, labels=LABELS, tasks=TASKS), raw)[0]
    assert sorted(r.label for r in sample.regions) == ["negative", "positive", "positive"]
    assert "lossy colour mask" in sample.provenance["mask"]


def test_a_file_that_does_not_split_into_equal_panels_is_an_exclusion(tmp_path):
    raw = tmp_path / "raw"
    deepliif(raw, width=6 * P - 3)
    samples, exclusions = read_samples(make_manifest(LAYOUT, labels=LABELS, tasks=TASKS), raw)
    assert samples == []
    assert [(e.item, e.reason) for e in exclusions] == [
        ("DeepLIIF_Testing_Set/Lung_0001.png",
         f"Lung_0001.png is {6 * P - 3}x{P} pixels, which does not split into 6 x 1 equal panels")]


@pytest.mark.parametrize("change, message", [
    ({"panels": {"across": 6, "image": 1, "mask": 7}}, "mask panel 7 does not exist"),
    ({"panels": {"across": 2, "image": 1, "mask": 1}}, "image and mask are both panel 1"),
    ({"masks": "masks/*.png"}, "give masks .* or panels .*, one of the two"),
    ({"panels": None}, "give masks .* or panels .*, one of the two"),
])
def test_panel_fields_are_checked(change, message):
    with pytest.raises(ValidationError, match=message):
        make_manifest({**LAYOUT, **change}, labels=LABELS, tasks=TASKS)
