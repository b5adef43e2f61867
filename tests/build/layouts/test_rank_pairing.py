"""mask_files with `pair_by: rank` (masks paired with images by their rank in natural order when the two numberings
differ), and two image series sharing one mask (an in-phase and an out-of-phase MR series, paired by rank or by parts).

The first replica follows Arvidsson's nuclei as torch-em's loader reads them (constantinpape/torch-em@
6f71247c0bde24cb050bb25501ca61517ce08b7f: torch_em/data/datasets/light_microscopy/arvidsson.py:
`zip(natsorted(glob(images/*.png)), natsorted(glob(annotations/*.png)))`); the second CHAOS's MR tree as its loader
reads it (same commit, torch_em/data/datasets/medical/chaos.py: `MR/<case>/T1DUAL/DICOM_anon/InPhase/*` with
`MR/<case>/T1DUAL/Ground/*`, each sorted with natsorted; the `OutPhase` folder beside `InPhase` as a third-party
preprocessor's pattern `(Train_Sets|Test_Sets)/MR/(\\d+)/T1DUAL/DICOM_anon/(InPhase|OutPhase)` reads). The file
numbers and the pixels are synthetic; the expected boxes are the rectangles drawn, written down.
"""
from __future__ import annotations

import numpy as np
import pytest
from PIL import Image
from pydantic import ValidationError
from support.build_manifests import make_manifest
from support.catalogue_replica import write_dicom

from mmbu.build.layouts import read_mask, read_samples, region_mask

TASKS = ["mask_grounded_classification", "box_grounded_classification", "object_detection"]
H, W = 16, 20


def save(path, array):
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(array).save(path)


def box_mask(row: int, value: int = 255) -> np.ndarray:
    mask = np.zeros((H, W), np.uint8)
    mask[row:row + 3, 2:6] = value
    return mask


def arvidsson(raw, images=("img2", "img10", "img1"), masks=("a_02", "a_010", "a_1")):
    """Images and masks whose names share nothing; their natural orders agree: img1, img2, img10 and a_1, a_02, a_010
    (a plain sort would put img10 before img2)."""
    for index, name in enumerate(images):
        save(raw / "training_nuclei" / "images" / f"{name}.png", np.full((H, W), 10 * index, np.uint8))
    for name in masks:
        row = {"a_1": 1, "a_02": 5, "a_010": 9}.get(name, 12)
        save(raw / "training_nuclei" / "annotations" / f"{name}.png", box_mask(row))


RANK_LAYOUT = {"kind": "mask_files", "image": "{split}/images/*.png", "masks": ["{split}/annotations/*.png"],
               "pair_by": "rank", "objects": "components", "label": "nucleus"}


def test_masks_pair_with_images_by_natural_rank_inside_their_group(tmp_path):
    raw = tmp_path / "raw"
    arvidsson(raw)
    samples, exclusions = read_samples(make_manifest(RANK_LAYOUT, labels={"nucleus": "cell nucleus"}, tasks=TASKS),
                                       raw, tmp_path / "cache")
    assert exclusions == []
    by_image = {s.source_path.rsplit("/", 1)[-1]: s for s in samples}
    # img1 <-> a_1 (row 1), img2 <-> a_02 (row 5), img10 <-> a_010 (row 9)
    assert {name: s.regions[0].box for name, s in by_image.items()} == {
        "img1.png": (2.0, 1.0, 6.0, 4.0), "img2.png": (2.0, 5.0, 6.0, 8.0), "img10.png": (2.0, 9.0, 6.0, 12.0)}
    for name, row in (("img1.png", 1), ("img2.png", 5), ("img10.png", 9)):
        sample = by_image[name]
        assert np.array_equal(region_mask(read_mask(sample.mask_path), sample.regions[0]), box_mask(row) > 0)


def test_a_group_whose_counts_differ_is_one_exclusion_and_no_pair_is_guessed(tmp_path):
    raw = tmp_path / "raw"
    arvidsson(raw, masks=("a_02", "a_010"))
    samples, exclusions = read_samples(make_manifest(RANK_LAYOUT, labels={"nucleus": "cell nucleus"}, tasks=TASKS),
                                       raw)
    assert samples == []
    assert [(e.item, e.reason) for e in exclusions] == [(
        "training_nuclei/images/img1.png",
        "3 image(s) matching '{split}/images/*.png' (training_nuclei/images/) and 2 mask(s) matching "
        "'{split}/annotations/*.png' (training_nuclei/annotations/) cannot be paired by rank: the counts differ, so "
        "none of this group is read")]


def chaos(raw, case="1"):
    """Two slices of one case: an in-phase and an out-of-phase DICOM per slice, numbered differently (the two series
    are interleaved in acquisition), and one ground-truth PNG per slice shared by both series (value 63: synthetic)."""
    base = raw / "Train_Sets" / "MR" / case / "T1DUAL"
    for phase in ("InPhase", "OutPhase"):
        (base / "DICOM_anon" / phase).mkdir(parents=True)
    for slice_index, (in_number, out_number, row) in enumerate(((2, 1, 3), (4, 3, 8))):
        grey = np.full((H, W), 100 + slice_index, np.uint16)
        write_dicom(base / "DICOM_anon" / "InPhase" / f"IMG-0004-{in_number:05d}.dcm", grey)
        write_dicom(base / "DICOM_anon" / "OutPhase" / f"IMG-0004-{out_number:05d}.dcm", grey)
        save(base / "Ground" / f"IMG-0004-{in_number:05d}.png", box_mask(row, value=63))


CHAOS_LAYOUT = {"kind": "mask_files", "image": "Train_Sets/MR/{case}/T1DUAL/DICOM_anon/{phase}/*.dcm",
                "masks": ["Train_Sets/MR/{case}/T1DUAL/Ground/*.png"], "pair_by": "rank",
                "objects": "values", "mask_values": {63: "liver"}}


def test_two_image_series_share_one_mask_by_rank(tmp_path):
    chaos(tmp_path / "raw")
    samples, exclusions = read_samples(make_manifest(CHAOS_LAYOUT, labels={"liver": "liver"}, tasks=TASKS),
                                       tmp_path / "raw", tmp_path / "cache")
    assert exclusions == []
    boxes = {s.source_path.split("DICOM_anon/")[1]: s.regions[0].box for s in samples}
    assert boxes == {"InPhase/IMG-0004-00002.dcm": (2.0, 3.0, 6.0, 6.0), "InPhase/IMG-0004-00004.dcm": (2.0, 8.0, 6.0, 11.0),
                     "OutPhase/IMG-0004-00001.dcm": (2.0, 3.0, 6.0, 6.0), "OutPhase/IMG-0004-00003.dcm": (2.0, 8.0, 6.0, 11.0)}
    assert all(s.regions[0].label == "liver" for s in samples)


def test_two_image_series_share_one_mask_by_parts_when_their_numbers_agree(tmp_path):
    """The same tree paired by the slice number both names carry: the in-phase numbering is the ground truth's."""
    raw = tmp_path / "raw"
    chaos(raw)
    base = raw / "Train_Sets" / "MR" / "1" / "T1DUAL" / "DICOM_anon" / "OutPhase"
    for old, new in (("00001", "00002"), ("00003", "00004")):  # renumber out-of-phase like in-phase
        (base / f"IMG-0004-{old}.dcm").rename(base / f"IMG-0004-{new}.dcm")
    layout = {**CHAOS_LAYOUT, "pair_by": "parts",
              "image": "Train_Sets/MR/{case}/T1DUAL/DICOM_anon/{phase}/IMG-{n}.dcm",
              "masks": ["Train_Sets/MR/{case}/T1DUAL/Ground/IMG-{n}.png"]}
    samples, exclusions = read_samples(make_manifest(layout, labels={"liver": "liver"}, tasks=TASKS), raw)
    assert exclusions == []
    assert sorted((s.source_path.split("DICOM_anon/")[1], s.regions[0].box) for s in samples) == [
        ("InPhase/IMG-0004-00002.dcm", (2.0, 3.0, 6.0, 6.0)), ("InPhase/IMG-0004-00004.dcm", (2.0, 8.0, 6.0, 11.0)),
        ("OutPhase/IMG-0004-00002.dcm", (2.0, 3.0, 6.0, 6.0)), ("OutPhase/IMG-0004-00004.dcm", (2.0, 8.0, 6.0, 11.0))]


@pytest.mark.parametrize("change, message", [
    ({"masks": ["{split}/annotations/*.png", "{split}/more/*.png"]}, "one mask template"),
    ({"masks": ["{split}/{other}/*.png"]}, r"\['other'\] is not"),
    ({"pair_by": "parts"}, "shares no named part|names no part"),
])
def test_rank_pairing_fields_are_checked(change, message):
    with pytest.raises(ValidationError, match=message):
        make_manifest({**RANK_LAYOUT, **change, **({"image": "images/*.png"} if change.get("pair_by") else {})},
                      labels={"nucleus": "cell nucleus"}, tasks=TASKS)


def test_colours_that_only_tell_the_objects_of_a_file_apart_keep_touching_nuclei_apart(tmp_path):
    """Arvidsson's annotations are 24-bit RGB PNGs, one colour per nucleus on black (NFDI4BIOIMAGE's copy of the
    Zenodo record: "Annotations: 24-bit .png format (RGB)"; torch-em reads each colour as an object): two nuclei that
    touch stay two objects, and a colour used twice apart makes two objects."""
    raw = tmp_path / "raw"
    save(raw / "test_nuclei" / "images" / "img1.png", np.full((H, W), 40, np.uint8))
    rgb = np.zeros((H, W, 3), np.uint8)
    rgb[2:6, 2:6] = (200, 30, 30)      # touches the next one along x = 6
    rgb[2:6, 6:10] = (30, 200, 30)
    rgb[10:14, 12:16] = (200, 30, 30)  # the first colour again, apart
    save(raw / "test_nuclei" / "annotations" / "a_1.png", rgb)
    layout = {**RANK_LAYOUT, "object_colors": True}
    samples, exclusions = read_samples(make_manifest(layout, labels={"nucleus": "cell nucleus"}, tasks=TASKS), raw,
                                       tmp_path / "cache")

    assert exclusions == []
    (sample,) = samples
    assert sorted(r.box for r in sample.regions) == [(2.0, 2.0, 6.0, 6.0), (6.0, 2.0, 10.0, 6.0),
                                                       (12.0, 10.0, 16.0, 14.0)]
    assert {r.label for r in sample.regions} == {"nucleus"}
    without = read_samples(make_manifest(RANK_LAYOUT, labels={"nucleus": "cell nucleus"}, tasks=TASKS), raw)[0]
    assert len(without[0].regions) == 2  # read as one class, the touching pair merges into one component


@pytest.mark.parametrize("extra, message", [
    ({"objects": "file"}, "object_colors separates the objects of a file by colour"),
    ({"label": None, "mask_values": {1: "nucleus"}}, "object_colors separates the objects of a file by colour"),
])
def test_object_colors_needs_components_of_one_label(extra, message):
    with pytest.raises(ValidationError, match=message):
        make_manifest({**RANK_LAYOUT, "object_colors": True, **extra}, labels={"nucleus": "cell nucleus"},
                      tasks=TASKS)
