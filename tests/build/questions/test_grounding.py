"""Task items placed on converted PNGs: mapped boxes, ROI masks, and what cannot be placed."""
from __future__ import annotations

import numpy as np
from PIL import Image
from support.build_manifests import make_manifest, write_png

from mmbu.build.layouts import read_samples
from mmbu.build.questions import ConvertedImage, place_items, task_items
from mmbu.core.geometry import ConversionGeometry


def test_boxes_and_masks_follow_a_halving_conversion_and_lost_items_are_excluded(tmp_path):
    raw = tmp_path / "raw"
    write_png(raw / "images" / "a.png", size=(40, 20))
    write_png(raw / "images" / "b.png", size=(40, 20))
    mask = np.zeros((20, 40), np.uint8)
    mask[4:12, 8:24] = 1
    mask[0, 0] = 2  # one pixel: nearest-neighbour halving samples odd pixels only, so it vanishes
    (raw / "masks").mkdir()
    Image.fromarray(mask).save(raw / "masks" / "a.png")
    Image.fromarray(mask).save(raw / "masks" / "b.png")
    manifest = make_manifest({"kind": "image_mask_pairs", "images": "images/*.png", "masks": "masks/*.png",
                              "mask_values": {1: "gland", 2: "stroma"}},
                             labels={"gland": "gland", "stroma": "stroma"},
                             tasks=["box_grounded_classification", "mask_grounded_classification"])
    samples, _ = read_samples(manifest, raw)
    a, b = samples
    small = tmp_path / "a_small.png"
    Image.new("RGB", (20, 10)).save(small)
    halved = ConversionGeometry.scaled((40, 20), (20, 10)).to_json()
    converted = {a.sample_id: ConvertedImage(small, {"width": 20, "height": 10, "params": {"geometry": halved}})}

    placed, exclusions = place_items(task_items(samples, manifest), converted, tmp_path / "roi")

    def the(task, label):
        (found,) = [p for p in placed if p.task == task and p.item.label == label]
        return found

    gland_box = the("box_grounded_classification", "gland")
    assert gland_box.boxes == ((4, 2, 12, 6),) and gland_box.image_size == (20, 10)
    assert gland_box.image == small and gland_box.mask is None and gland_box.item.region.label == "gland"
    gland_mask = the("mask_grounded_classification", "gland")
    assert gland_mask.mask == tmp_path / "roi" / f"{gland_mask.sample_id}.png"  # written once, here
    roi = np.asarray(Image.open(gland_mask.mask)) > 0
    assert roi.shape == (10, 20) and roi[2:6, 4:12].all()
    assert roi.sum() == 4 * 8 and gland_mask.boxes == ((4, 2, 12, 6),)
    reasons = sorted((e.stage, e.reason) for e in exclusions)
    assert reasons[0] == ("convert", "the image has no converted PNG (see the conversion report)")
    assert ("layout", "the region is too small to survive the conversion's downscaling") in reasons
    assert len(exclusions) == 4 + 1  # b's four rows, a's vanished stroma mask row
    assert {e.sample_id for e in exclusions if e.stage == "convert"} == {i.sample_id for i in task_items([b], manifest)}


def test_region_masks_from_shared_components_equal_those_labelled_afresh():
    from mmbu.build.layouts import Region, region_mask, regions_from_mask

    mask = np.zeros((30, 40), np.uint8)
    mask[2:6, 2:6] = mask[10:14, 20:30] = 1  # two components of value 1
    mask[20:25, 5:9] = mask[20:25, 30:35] = mask[0:3, 35:40] = 2  # three of value 2
    regions = regions_from_mask(mask, make_manifest({"kind": "image_mask_pairs", "images": "*.png", "masks": "m/*.png",
                                                     "mask_values": {1: "a", 2: "b"}, "instances": "components"},
                                                    labels={"a": "a", "b": "b"}).layout)
    assert len(regions) == 5
    shared: dict[int, np.ndarray] = {}
    for region in [*regions, Region(label="a", instance="v1", mask_value=1)]:
        assert np.array_equal(region_mask(mask, region, shared), region_mask(mask, region))
    assert sorted(shared) == [1, 2]
