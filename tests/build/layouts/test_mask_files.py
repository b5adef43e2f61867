"""mask_files: masks paired with images by templates; one file per object, further instances, label
volumes under another name, JPEG masks thresholded without specks."""
from __future__ import annotations

import io

import nibabel as nib
import numpy as np
import pytest
from PIL import Image
from pydantic import ValidationError
from support.build_manifests import make_manifest

from mmbu.build.layouts import read_mask, read_samples, region_mask

DSB_ID = "00071198d059ba7f5914a526d124d28e6d010c92466da21d4a04cd5413362552"
DSB_MASKS = ("07a9bf1d7594af2763c86e93f05d22c4d5181353c6d3ab30a345b908ffe5aadc",
             "0e548d0af63ab451616f082eb56bde13eb71f73dfda92a03fbe88ad42ebb4881",
             "5522143fa8723b66b1e0b25331047e6ae6eeec664f7c8abeba687e0de0f9060a",
             "aa154c70e0d82669e9e492309bd00536d2b0f6eeec1210014bbafbfc554b377c")


def save(path, array, **options):
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(array).save(path, **options)


def dsb2018(raw):
    """2018 Data Science Bowl `stage1_train/<id>/images/<id>.png` (RGBA) and `<id>/masks/<hash>.png`, one
    0/255 PNG per nucleus (constantinpape/torch-em@6f71247c0bde24cb050bb25501ca61517ce08b7f:
    torch_em/data/datasets/light_microscopy/dsb.py; the id and mask names are the competition's first
    training image as public loaders read it)."""
    image = np.zeros((32, 40, 4), np.uint8)
    image[..., 3] = 255
    image[..., :3] = np.arange(40, dtype=np.uint8)[None, :, None]
    save(raw / "stage1_train" / DSB_ID / "images" / f"{DSB_ID}.png", image)
    objects = [(2, 6, 3, 9), (10, 14, 20, 30), (20, 30, 5, 8), None]  # rows, cols; the last mask is empty
    for name, rows_cols in zip(DSB_MASKS, objects):
        mask = np.zeros((32, 40), np.uint8)
        if rows_cols:
            r0, r1, c0, c1 = rows_cols
            mask[r0:r1, c0:c1] = 255
        save(raw / "stage1_train" / DSB_ID / "masks" / f"{name}.png", mask)
    return objects


DSB_LAYOUT = {"kind": "mask_files", "image": "stage1_train/{id}/images/{id}.png", "masks": ["stage1_train/{id}/masks/*.png"],
              "objects": "file", "label": "nucleus"}
TASKS = ["mask_grounded_classification", "box_grounded_classification", "object_detection"]


def test_one_file_per_nucleus_becomes_one_instance_each(tmp_path):
    raw = tmp_path / "raw"
    objects = dsb2018(raw)
    samples, exclusions = read_samples(make_manifest(DSB_LAYOUT, labels={"nucleus": "cell nucleus"}, tasks=TASKS), raw,
                                       tmp_path / "cache")

    sample, = samples
    assert sample.source_path == f"stage1_train/{DSB_ID}/images/{DSB_ID}.png" and sample.image_size == (40, 32)
    assert [r.box for r in sample.regions] == [(3.0, 2.0, 9.0, 6.0), (20.0, 10.0, 30.0, 14.0), (5.0, 20.0, 8.0, 30.0)]
    assert [r.instance for r in sample.regions] == [f"stage1_train/{DSB_ID}/masks/{n}.png" for n in DSB_MASKS[:3]]
    assert sample.mask_path.parent == tmp_path / "cache" / "masks"
    ids = read_mask(sample.mask_path)
    for region, (r0, r1, c0, c1) in zip(sample.regions, objects):
        expected = np.zeros((32, 40), bool)
        expected[r0:r1, c0:c1] = True
        assert np.array_equal(region_mask(ids, region), expected)
    assert [(e.item.rsplit("/", 1)[-1], e.reason) for e in exclusions] == [
        (f"{DSB_MASKS[3]}.png", "the object's mask is empty")]


def test_a_rebuild_keeps_the_assembled_mask_file_untouched(tmp_path):
    raw = tmp_path / "raw"
    dsb2018(raw)
    manifest = make_manifest(DSB_LAYOUT, labels={"nucleus": "cell nucleus"}, tasks=TASKS)
    first, _ = read_samples(manifest, raw, tmp_path / "cache")
    stamp = first[0].mask_path.stat().st_mtime_ns
    second, _ = read_samples(manifest, raw, tmp_path / "cache")
    assert second == first and second[0].mask_path.stat().st_mtime_ns == stamp  # the converter's cache stays valid


def test_wrong_sized_masks_orphans_and_images_without_masks(tmp_path):
    raw = tmp_path / "raw"
    dsb2018(raw)
    save(raw / "stage1_train" / DSB_ID / "masks" / "small.png", np.full((8, 8), 255, np.uint8))
    save(raw / "stage1_train" / "lonely" / "images" / "lonely.png", np.zeros((8, 8), np.uint8))
    save(raw / "stage1_train" / "orphan" / "masks" / "m.png", np.zeros((8, 8), np.uint8))
    samples, exclusions = read_samples(make_manifest(DSB_LAYOUT, labels={"nucleus": "cell nucleus"}, tasks=TASKS), raw,
                                       tmp_path / "cache")
    assert len(samples) == 1 and len(samples[0].regions) == 3
    reasons = {e.item: e.reason for e in exclusions}
    assert reasons[f"stage1_train/{DSB_ID}/masks/small.png"] == "the mask is 8x8 but its image is 40x32"
    assert reasons["stage1_train/lonely/images/lonely.png"].startswith("no mask file matching")
    assert reasons["stage1_train/orphan/masks/m.png"] == "mask without a matching image"


def busi(raw):
    """BUSI `Dataset_BUSI_with_GT/<class>/<class> (n).png` with `<class> (n)_mask.png` and, for a second lesion,
    `<class> (n)_mask_1.png` (constantinpape/torch-em@6f71247c0bde24cb050bb25501ca61517ce08b7f:
    torch_em/data/datasets/medical/busi.py; /work/shared/reference/catalogue-sources.md)."""
    root = raw / "Dataset_BUSI_with_GT"
    save(root / "benign" / "benign (4).png", np.full((30, 50), 90, np.uint8))
    first = np.zeros((30, 50), np.uint8)
    first[5:15, 5:20] = 255
    second = np.zeros((30, 50), np.uint8)
    second[18:25, 30:45] = 255
    save(root / "benign" / "benign (4)_mask.png", first)
    save(root / "benign" / "benign (4)_mask_1.png", second)
    save(root / "malignant" / "malignant (2).png", np.full((30, 50), 60, np.uint8))
    third = np.zeros((30, 50), np.uint8)
    third[0:10, 0:10] = 255
    save(root / "malignant" / "malignant (2)_mask.png", third)
    save(root / "normal" / "normal (1).png", np.full((30, 50), 70, np.uint8))
    save(root / "normal" / "normal (1)_mask.png", np.zeros((30, 50), np.uint8))


BUSI_LAYOUT = {"kind": "mask_files", "image": "Dataset_BUSI_with_GT/{label}/{stem}.png",
               "masks": ["Dataset_BUSI_with_GT/{label}/{stem}_mask.png", "Dataset_BUSI_with_GT/{label}/{stem}_mask_{n:d}.png"],
               "objects": "file", "label_part": "label"}
BUSI_LABELS = {"benign": "lesion without malignant features", "malignant": "lesion with malignant features",
               "normal": "normal tissue"}


def test_further_mask_files_are_further_instances_and_the_label_comes_from_a_named_part(tmp_path):
    raw = tmp_path / "raw"
    busi(raw)
    samples, exclusions = read_samples(make_manifest(BUSI_LAYOUT, labels=BUSI_LABELS, tasks=TASKS), raw,
                                       tmp_path / "cache")

    assert [(s.source_path, [(r.label, r.box) for r in s.regions]) for s in samples] == [
        ("Dataset_BUSI_with_GT/benign/benign (4).png",
         [("benign", (5.0, 5.0, 20.0, 15.0)), ("benign", (30.0, 18.0, 45.0, 25.0))]),
        ("Dataset_BUSI_with_GT/malignant/malignant (2).png", [("malignant", (0.0, 0.0, 10.0, 10.0))])]
    ids = read_mask(samples[0].mask_path)
    assert (region_mask(ids, samples[0].regions[1])[18:25, 30:45]).all() and region_mask(ids, samples[0].regions[1]).sum() == 105
    assert [e.item for e in exclusions] == [
        "Dataset_BUSI_with_GT/normal/normal (1).png#Dataset_BUSI_with_GT/normal/normal (1)_mask.png"]


def test_jpeg_masks_are_thresholded_without_specks_and_the_threshold_is_recorded(tmp_path):
    """Kvasir-SEG `Kvasir-SEG/images/<id>.jpg` with an RGB JPEG mask of the same name in `masks/` (torch-em
    medical/kvasir.py at the commit above; the file name is the archive's first image as loaders cite it)."""
    raw = tmp_path / "raw"
    name = "cju0qkwl35piu0993l0dewei2"
    save(raw / "Kvasir-SEG" / "images" / f"{name}.jpg", np.full((48, 64, 3), 120, np.uint8), quality=90)
    truth = np.zeros((48, 64), bool)
    truth[9:33, 13:45] = True
    truth[20:26, 40:60] = True  # a lobe
    save(raw / "Kvasir-SEG" / "masks" / f"{name}.jpg", np.repeat(np.where(truth, 255, 0).astype(np.uint8)[..., None], 3, 2),
         quality=75)
    stored = np.asarray(Image.open(raw / "Kvasir-SEG" / "masks" / f"{name}.jpg").convert("L"))
    assert len(np.unique(stored)) > 2  # the compression noise this test is about
    layout = {"kind": "mask_files", "image": "Kvasir-SEG/images/{stem}.jpg", "masks": ["Kvasir-SEG/masks/{stem}.jpg"],
              "objects": "components", "label": "polyp", "min_region_pixels": 20}
    samples, exclusions = read_samples(make_manifest(layout, labels={"polyp": "polyp"}, tasks=TASKS), raw,
                                       tmp_path / "cache")

    sample, = samples
    assert exclusions == [] and len(sample.regions) == 1
    assert np.array_equal(region_mask(read_mask(sample.mask_path), sample.regions[0]), truth)
    assert sample.regions[0].box == (13.0, 9.0, 60.0, 33.0)
    assert sample.provenance == {f"mask Kvasir-SEG/masks/{name}.jpg": "threshold 128: values >= 128 are the object"}


def test_jpeg_label_masks_snap_to_declared_values_without_edge_specks(tmp_path):
    raw = tmp_path / "raw"
    save(raw / "images" / "a.png", np.zeros((40, 40), np.uint8))
    truth = np.zeros((40, 40), np.uint8)
    truth[4:20, 4:36] = 255    # a bright class next to
    truth[20:36, 4:36] = 128   # a mid-grey class: the 255/128 edge rings through values of neither
    save(raw / "labels" / "a.jpg", truth, quality=60)
    layout = {"kind": "mask_files", "image": "images/{stem}.png", "masks": ["labels/{stem}.jpg"], "objects": "values",
              "mask_values": {128: "stroma", 255: "gland"}}
    samples, _ = read_samples(make_manifest(layout, labels={"stroma": "stroma", "gland": "gland"},
                                            tasks=["mask_grounded_classification"]), raw, tmp_path / "cache")
    ids = read_mask(samples[0].mask_path)
    by_label = {r.label: region_mask(ids, r) for r in samples[0].regions}
    assert set(by_label) == {"gland", "stroma"}
    assert np.array_equal(by_label["gland"], truth == 255) and np.array_equal(by_label["stroma"], truth == 128)
    assert "snapped to the nearest of 0, 128, 255" in next(iter(samples[0].provenance.values()))


def test_label_volumes_with_another_file_name_pair_by_case(tmp_path):
    """KiTS19 `data/case_00000/imaging.nii.gz` + `segmentation.nii.gz` (0 background, 1 kidney, 2 tumour;
    openmedlab/Awesome-Medical-Dataset@81da0eee1a0c75688f1a68dcd7c8da8297910ee9:resources/KiTS19.md)."""
    raw = tmp_path / "raw"
    for case in ("case_00000", "case_00001"):
        (raw / "data" / case).mkdir(parents=True)
        volume = np.random.default_rng(0).normal(size=(12, 16, 6)).astype(np.float32)
        labels = np.zeros((12, 16, 6), np.uint8)
        labels[2:6, 3:9, 3] = 1
        labels[3:4, 4:5, 3] = 2
        nib.save(nib.Nifti1Image(volume, np.eye(4)), raw / "data" / case / "imaging.nii.gz")
        if case == "case_00000":
            nib.save(nib.Nifti1Image(labels, np.eye(4)), raw / "data" / case / "segmentation.nii.gz")
    layout = {"kind": "mask_files", "image": "data/case_{id}/imaging.nii.gz", "masks": ["data/case_{id}/segmentation.nii.gz"],
              "mask_values": {1: "kidney", 2: "tumor"}}
    samples, exclusions = read_samples(make_manifest(layout, labels={"kidney": "kidney", "tumor": "tumour"},
                                                     tasks=["mask_grounded_classification"],
                                                     convert={"slice": "mask_max_area"}), raw, tmp_path / "cache")
    assert [(s.source_path, s.mask_path.name, [(r.label, r.mask_value) for r in s.regions]) for s in samples] == [
        ("data/case_00000/imaging.nii.gz", "segmentation.nii.gz", [("kidney", 1), ("tumor", 2)])]
    assert [e.item for e in exclusions] == ["data/case_00001/imaging.nii.gz"]


@pytest.mark.parametrize("layout, message", [
    ({"image": "images/a.png", "masks": ["m/{stem}.png"]}, "names no part"),
    ({"image": "images/{stem}.png", "masks": ["m/{other}.png"]}, "shares no named part"),
    ({"image": "images/{stem}.png", "masks": ["m/{stem}.png"], "objects": "file"}, "needs label"),
    ({"image": "images/{stem}.png", "masks": ["m/{stem}.png"]}, "needs mask_values"),
    ({"image": "images/{stem}.png", "masks": ["m/{stem}.png"], "label_part": "class", "objects": "file"},
     "is not a part of image"),
    ({"image": "images/{id}.jpg", "masks": ["m/{id}_attribute_{attribute}.png"], "label_part": "atribute",
      "objects": "file"}, "is not a part of image or of every mask template; did you mean 'attribute'"),
    ({"image": "images/{id}.jpg", "masks": ["m/{id}_attribute_{attribute}.png", "m/{id}.png"],
      "label_part": "attribute", "objects": "file"}, "of every mask template"),
])
def test_mask_files_fields_are_checked(layout, message):
    with pytest.raises(ValidationError, match=message):
        make_manifest({"kind": "mask_files", **layout}, labels={"a": "a"}, tasks=["mask_grounded_classification"])


ISIC_ATTRIBUTES = ("globules", "milia_like_cyst", "negative_network", "pigment_network", "streaks")


def isic2018_task2(raw):
    """ISIC 2018 Task 2 (lesion attribute detection): `ISIC2018_Task1-2_Training_Input/ISIC_<7 digits>.jpg` and
    one 0/255 PNG per attribute in `ISIC2018_Task2_Training_GroundTruth_v3/ISIC_<7 digits>_attribute_<name>.png`,
    the five names globules, milia_like_cyst, negative_network, pigment_network, streaks, all-zero where the
    attribute is absent (dataset-ninja/isic-challenge-2018@3449a82bf0024b5475d01cffaa2151e9e31c95e3:src/convert.py,
    `train_masks2_path` and `masks2_exts`)."""
    images, truth = raw / "ISIC2018_Task1-2_Training_Input", raw / "ISIC2018_Task2_Training_GroundTruth_v3"
    areas = {"ISIC_0000000": {"pigment_network": (4, 20, 6, 30), "streaks": (16, 24, 26, 34)},
             "ISIC_0000001": {"globules": (2, 8, 2, 8)},
             "ISIC_0000002": {}}  # no attribute at all
    for name, present in areas.items():
        save(images / f"{name}.jpg", np.full((28, 40, 3), 150, np.uint8))
        for attribute in ISIC_ATTRIBUTES:
            mask = np.zeros((28, 40), np.uint8)
            if attribute in present:
                r0, r1, c0, c1 = present[attribute]
                mask[r0:r1, c0:c1] = 255
            save(truth / f"{name}_attribute_{attribute}.png", mask)
    return areas


ISIC_TASK2_LAYOUT = {"kind": "mask_files", "image": "ISIC2018_Task1-2_Training_Input/{id}.jpg",
                     "masks": ["ISIC2018_Task2_Training_GroundTruth_v3/{id}_attribute_{attribute}.png"],
                     "objects": "file", "label_part": "attribute", "empty_masks": "absent"}
ISIC_LABELS = {name: name.replace("_", " ") for name in ISIC_ATTRIBUTES}


def test_the_label_comes_from_each_mask_file_name_and_empty_attribute_masks_mean_absent(tmp_path):
    raw = tmp_path / "raw"
    isic2018_task2(raw)
    samples, exclusions = read_samples(make_manifest(ISIC_TASK2_LAYOUT, labels=ISIC_LABELS, tasks=TASKS), raw,
                                       tmp_path / "cache")

    first, second = samples
    assert first.source_path == "ISIC2018_Task1-2_Training_Input/ISIC_0000000.jpg"
    assert [(r.label, r.box) for r in first.regions] == [("pigment_network", (6.0, 4.0, 30.0, 20.0)),
                                                         ("streaks", (26.0, 16.0, 34.0, 24.0))]
    ids = read_mask(first.mask_path)
    network, streaks = (region_mask(ids, r) for r in first.regions)
    assert streaks.sum() == 8 * 8 and streaks[16:24, 26:34].all()  # the later file keeps the shared pixels ...
    assert network.sum() == 16 * 24 - 4 * 4 and not network[16:20, 26:30].any()
    assert first.provenance[
        "overlap ISIC2018_Task2_Training_GroundTruth_v3/ISIC_0000000_attribute_streaks.png"
    ] == "16 pixels drawn over earlier objects"  # ... and the provenance says how many
    assert first.provenance[
        "mask ISIC2018_Task2_Training_GroundTruth_v3/ISIC_0000000_attribute_globules.png"] == "empty: no globules in this image"
    assert [(r.label, r.box) for r in second.regions] == [("globules", (2.0, 2.0, 8.0, 8.0))]
    assert [(e.item, e.reason) for e in exclusions] == [  # an image without any attribute: one sentence, not five
        ("ISIC2018_Task1-2_Training_Input/ISIC_0000002.jpg", "its mask files hold no object")]


def test_a_mask_file_name_naming_an_unknown_attribute_is_an_exclusion_and_the_rest_builds(tmp_path):
    raw = tmp_path / "raw"
    isic2018_task2(raw)
    labels = {k: v for k, v in ISIC_LABELS.items() if k != "streaks"}
    samples, exclusions = read_samples(make_manifest(ISIC_TASK2_LAYOUT, labels=labels, tasks=TASKS), raw,
                                       tmp_path / "cache")
    assert [[r.label for r in s.regions] for s in samples] == [["pigment_network"], ["globules"]]
    assert ("ISIC2018_Task1-2_Training_Input/ISIC_0000000.jpg#ISIC2018_Task2_Training_GroundTruth_v3/"
            "ISIC_0000000_attribute_streaks.png", "object label 'streaks' is not in the manifest's label vocabulary"
            ) in [(e.item, e.reason) for e in exclusions]


def test_empty_masks_absent_is_only_for_one_object_per_file():
    with pytest.raises(ValidationError, match="empty_masks: absent is for objects: file"):
        make_manifest({**ISIC_TASK2_LAYOUT, "objects": "components"}, labels=ISIC_LABELS, tasks=TASKS)
