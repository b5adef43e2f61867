"""arrays over multi-page TIFF stacks: an image stack and its label stack paired page by page, and a label stack that
annotates a shorter range of the movie (`start`).

The replica follows DenseCell's platelet SBF-SEM data as torch-em's loader reads it
(constantinpape/torch-em@6f71247c0bde24cb050bb25501ca61517ce08b7f: torch_em/data/datasets/electron_microscopy/densecell.py):
`platelet_data/train-images.tif` beside `train-labels.tif`, read with `tifffile.imread` as (z, y, x) stacks. The pages
are synthetic and written by tifffile; the expected boxes and masks are the rectangles drawn, written down.
"""
from __future__ import annotations

import numpy as np
import pytest
import tifffile
from PIL import Image
from pydantic import ValidationError
from support.build_manifests import make_manifest

from mmbu.build.layouts import read_mask, read_samples, region_mask
from mmbu.build.layouts.array_files import open_array

TASKS = ["mask_grounded_classification", "box_grounded_classification", "object_detection"]
H, W = 20, 24
LABELS = {"1": "cell", "2": "mitochondrion"}
LAYOUT = {"kind": "arrays", "images": "platelet_data/{split}-images.tif", "masks": "platelet_data/{split}-labels.tif",
          "mask_values": {1: "1", 2: "2"}}


def page(index: int) -> np.ndarray:
    return ((np.add.outer(np.arange(H), np.arange(W)) + 7 * index) % 256).astype(np.uint8)


def labels(index: int) -> tuple[np.ndarray, dict[str, tuple[float, float, float, float]]]:
    """Page `index` of a label stack: a cell and, on even pages, a mitochondrion; and their boxes."""
    mask = np.zeros((H, W), np.uint8)
    mask[1 + index % 3:9, 2:10 + index % 4] = 1
    boxes = {"1": (2.0, float(1 + index % 3), float(10 + index % 4), 9.0)}
    if index % 2 == 0:
        mask[12:18, 14:20] = 2
        boxes["2"] = (14.0, 12.0, 20.0, 18.0)
    return mask, boxes


def densecell(raw, frames=6, labelled=range(6), split="train"):
    folder = raw / "platelet_data"
    folder.mkdir(parents=True, exist_ok=True)
    # minisblack: one grey page per frame, as stack writers (ImageJ, tifffile's own future default) store them
    tifffile.imwrite(folder / f"{split}-images.tif", np.stack([page(i) for i in range(frames)]), photometric="minisblack")
    tifffile.imwrite(folder / f"{split}-labels.tif", np.stack([labels(i)[0] for i in labelled]),
                     photometric="minisblack")


def test_an_image_stack_and_its_label_stack_pair_page_by_page(tmp_path):
    raw = tmp_path / "raw"
    densecell(raw)
    samples, exclusions = read_samples(make_manifest(LAYOUT, labels=LABELS, tasks=TASKS), raw, tmp_path / "cache")

    assert exclusions == []
    assert [s.part for s in samples] == [f"index={i}" for i in range(6)]
    for index, sample in enumerate(samples):
        assert sample.source_path == "platelet_data/train-images.tif"
        expected_mask, boxes = labels(index)
        assert {r.label: r.box for r in sample.regions} == boxes
        stored = read_mask(sample.mask_path)
        for region in sample.regions:
            assert np.array_equal(region_mask(stored, region), expected_mask == int(region.label))
        assert np.array_equal(np.asarray(Image.open(sample.image_path)), page(index))  # cached losslessly


def test_a_label_stack_of_a_shorter_range_pairs_from_its_start(tmp_path):
    """Frames 3-5 of a ten-frame movie are annotated: label page k belongs to movie frame 3 + k."""
    raw = tmp_path / "raw"
    densecell(raw, frames=10, labelled=range(3, 6))
    layout = {**LAYOUT, "masks": {"file": "platelet_data/{split}-labels.tif", "start": 3}}
    samples, exclusions = read_samples(make_manifest(layout, labels=LABELS, tasks=TASKS), raw, tmp_path / "cache")

    assert [s.part for s in samples] == ["index=3", "index=4", "index=5"]
    assert [{r.label: r.box for r in s.regions} for s in samples] == [labels(i)[1] for i in (3, 4, 5)]
    assert [(e.item, e.reason) for e in exclusions] == [
        ("platelet_data/train-images.tif", "items 0-2, 6-9 have no mask: platelet_data/train-labels.tif covers "
                                           "items 3-5")]


def test_a_label_stack_reaching_past_the_movie_is_one_exclusion(tmp_path):
    raw = tmp_path / "raw"
    densecell(raw, frames=4, labelled=range(2, 5))
    layout = {**LAYOUT, "masks": {"file": "platelet_data/{split}-labels.tif", "start": 2}}
    samples, exclusions = read_samples(make_manifest(layout, labels=LABELS, tasks=TASKS), raw)
    assert samples == []
    assert [e.reason for e in exclusions] == [
        "masks (platelet_data/train-labels.tif) holds 3 items from images item 2 on, past the images' 4 items"]


def test_tiff_pages_are_read_one_at_a_time(tmp_path):
    raw = tmp_path / "raw"
    densecell(raw, frames=5)
    stack = open_array(raw / "platelet_data" / "train-images.tif")
    try:
        assert stack.shape == (5, H, W) and "5 pages read one at a time" in stack.access
        assert np.array_equal(stack.item(4), page(4))
    finally:
        stack.close()


@pytest.mark.parametrize("change, message", [
    ({"images": {"file": "platelet_data/{split}-images.tif", "start": 1}}, "the images and metadata arrays take none"),
    ({"masks": {"file": "platelet_data/{split}-labels.tif", "start": -1}}, "greater than or equal to 0"),
])
def test_start_is_checked(change, message):
    with pytest.raises(ValidationError, match=message):
        make_manifest({**LAYOUT, **change}, labels=LABELS, tasks=TASKS)
