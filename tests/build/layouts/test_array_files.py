"""arrays with items: file: one .npy per image (LyNSeC: image and instance ids in one array; IHC-TMA: a PNG image
with a channels-first .npy mask), channel selection, and the bad inputs of per-file arrays."""
from __future__ import annotations

import numpy as np
import pytest
from PIL import Image
from pydantic import ValidationError
from support.build_manifests import make_manifest

from mmbu.build.layouts import read_mask, read_samples, region_mask

TASKS = ["mask_grounded_classification", "box_grounded_classification", "object_detection"]


def lynsec(raw):
    """LyNSeC (Zenodo 8065174, `lynsec.zip`): folders `lynsec 1` (IHC), `lynsec 2`, `lynsec 3` (H&E) of `.npy` files,
    each one (H, W, 4) array per image: RGB in channels 0-2, nucleus instance ids in channel 3; torch-em names the
    H&E files `<i>_l2` (constantinpape/torch-em@6f71247c0bde24cb050bb25501ca61517ce08b7f:
    torch_em/data/datasets/histopathology/lynsec.py `_preprocess_dataset`: `darray[..., :3]`, `darray[..., 3]`;
    instanseg/instanseg@835ce660997f57d6448b3590ee806ccad9b0191e:instanseg/utils/data_download.py `load_LyNSeC`).
    The arrays are 256 pixels square in the release; 24 here, stored as float64 like a loader's `np.save`."""
    folder = raw / "lynsec 2"
    folder.mkdir(parents=True)
    rgb = np.random.default_rng(3).integers(0, 256, (24, 32, 3)).astype(np.float64)
    ids = np.zeros((24, 32))
    ids[2:8, 3:9] = 1
    ids[12:20, 10:14] = 7
    np.save(folder / "0_l2.npy", np.dstack([rgb, ids]))
    empty = np.dstack([rgb, np.zeros((24, 32))])
    np.save(folder / "1_l2.npy", empty)  # no nucleus at all
    return rgb, ids


LYNSEC_LAYOUT = {"kind": "arrays", "items": "file", "axes": "HWC",
                 "images": {"file": "lynsec {n:d}/{stem}.npy", "channels": [0, 1, 2]},
                 "masks": {"file": "lynsec {n:d}/{stem}.npy", "channels": [3]},
                 "instances": "ids", "instance_label": "nucleus"}


def test_one_npy_per_image_holds_the_image_channels_and_the_instance_id_channel(tmp_path):
    raw = tmp_path / "raw"
    rgb, ids = lynsec(raw)
    manifest = make_manifest(LYNSEC_LAYOUT, labels={"nucleus": "cell nucleus"}, tasks=TASKS)
    samples, exclusions = read_samples(manifest, raw, tmp_path / "cache")

    sample, = samples
    assert (sample.source_path, sample.part) == ("lynsec 2/0_l2.npy", "file;channels=0,1,2")
    assert np.array_equal(np.asarray(Image.open(sample.image_path)), rgb.astype(np.uint8))  # losslessly 8-bit
    assert [(r.label, r.instance, r.box) for r in sample.regions] == [
        ("nucleus", "id-1", (3.0, 2.0, 9.0, 8.0)), ("nucleus", "id-7", (10.0, 12.0, 14.0, 20.0))]
    stored = read_mask(sample.mask_path)
    for region in sample.regions:
        assert np.array_equal(region_mask(stored, region), ids == region.mask_value)
    assert [(e.item, e.reason) for e in exclusions] == [
        ("lynsec 2/1_l2.npy#file;channels=0,1,2", "no annotated object with a known label is left in this image")]
    assert read_samples(manifest, raw, tmp_path / "cache")[0][0].sample_id == sample.sample_id  # stable


def test_an_instance_channel_with_a_class_channel_labels_each_nucleus_by_its_class(tmp_path):
    """LyNSeC 1 and 3 add a fifth channel, the class map (LyNSeC 1: 1 marker-negative, 2 marker-positive), per
    the Zenodo record's description (NFDI4BIOIMAGE/training@14eb05fb8da96b33e995b7cafb724545260dcef8:
    resources/nfdi4bioimage.yml): each nucleus takes the class most of its pixels hold."""
    folder = tmp_path / "raw" / "lynsec 1"
    folder.mkdir(parents=True)
    rgb = np.full((24, 32, 3), 200.0)
    ids, classes = np.zeros((24, 32)), np.zeros((24, 32))
    ids[2:8, 3:9], classes[2:8, 3:9] = 1, 2          # positive
    ids[12:20, 10:14], classes[12:20, 10:14] = 4, 1  # negative, though one row is marked positive
    classes[12, 10:14] = 2
    ids[20:23, 20:30] = 5                             # no class pixel: dropped with a reason
    ids[2:5, 20:24], classes[2:5, 20:24] = 6, 3       # a class the manifest does not name
    np.save(folder / "0_l1.npy", np.dstack([rgb, ids, classes]))
    layout = {"kind": "arrays", "items": "file", "axes": "HWC",
              "images": {"file": "lynsec 1/{stem}.npy", "channels": [0, 1, 2]},
              "masks": {"file": "lynsec 1/{stem}.npy", "channels": [3, 4]},
              "instances": "ids", "instance_classes": {1: "negative", 2: "positive"}}
    manifest = make_manifest(layout, labels={"negative": "marker-negative nucleus",
                                             "positive": "marker-positive nucleus"}, tasks=TASKS)
    samples, exclusions = read_samples(manifest, tmp_path / "raw", tmp_path / "cache")

    sample, = samples
    assert [(r.label, r.instance, r.box) for r in sample.regions] == [
        ("positive", "id1", (3.0, 2.0, 9.0, 8.0)), ("negative", "id4", (10.0, 12.0, 14.0, 20.0))]
    stored = read_mask(sample.mask_path)
    assert np.array_equal(region_mask(stored, sample.regions[1]), ids == 4)
    assert sorted((e.item.split("#")[-1], e.reason) for e in exclusions) == [
        ("id5", "the object has no class in the class channel"),
        ("id6", "object label '3' is not in the manifest's label vocabulary")]  # an unnamed class value
    with pytest.raises(ValidationError, match="instance_classes reads two mask channels"):
        make_manifest({**layout, "masks": {"file": "lynsec 1/{stem}.npy", "channels": [3]}},
                      labels={"negative": "n", "positive": "p"}, tasks=TASKS)
    with pytest.raises(ValidationError, match="it needs instances: ids"):
        make_manifest({**layout, "instance_label": "nucleus"}, labels={"negative": "n", "positive": "p",
                                                                        "nucleus": "n"}, tasks=TASKS)


def ihc_tma(raw):
    """IHC-TMA (Zenodo 7647846, `IHC_TMA_dataset.zip`): `IHC_TMA_dataset/images/<name>.png` with
    `IHC_TMA_dataset/masks/<name>.npy`, a channels-first array whose first two channels InstanSeg merges into the
    nucleus mask before separating touching nuclei (instanseg/instanseg@835ce660997f57d6448b3590ee806ccad9b0191e:
    instanseg/utils/data_download.py `load_IHC_TMA`: `masks[0:2]`). What each channel holds is not stated there;
    the manifest names them. The file stem is the loader's directory listing; `tma_01` stands for it."""
    root = raw / "IHC_TMA_dataset"
    (root / "images").mkdir(parents=True)
    (root / "masks").mkdir()
    Image.fromarray(np.full((20, 30, 3), 170, np.uint8)).save(root / "images" / "tma_01.png")
    masks = np.zeros((3, 20, 30), np.uint8)
    masks[0, 2:6, 2:6] = 1    # two separate nuclei in the first channel
    masks[0, 2:6, 10:14] = 1
    masks[1, 12:18, 20:26] = 1  # one in the second
    masks[2] = 9              # a third channel the manifest leaves out
    np.save(root / "masks" / "tma_01.npy", masks)
    Image.fromarray(np.full((20, 30, 3), 170, np.uint8)).save(root / "images" / "tma_02.png")
    np.save(root / "masks" / "tma_02.npy", np.zeros((3, 10, 30), np.uint8))  # the wrong height


def test_an_image_file_with_a_channels_first_npy_mask_keeps_the_image_file_as_the_sample(tmp_path):
    raw = tmp_path / "raw"
    ihc_tma(raw)
    layout = {"kind": "arrays", "items": "file", "images": "IHC_TMA_dataset/images/{name}.png",
              "masks": {"file": "IHC_TMA_dataset/masks/{name}.npy", "channels": [0, 1]}, "mask_axes": "CHW",
              "mask_channels": ["first channel nucleus", "second channel nucleus"], "instances": "components"}
    labels = {"first channel nucleus": "nucleus", "second channel nucleus": "nucleus"}
    samples, exclusions = read_samples(make_manifest(layout, labels=labels, tasks=TASKS), raw, tmp_path / "cache")

    sample, = samples
    assert sample.source_path == "IHC_TMA_dataset/images/tma_01.png" and sample.image_path.suffix == ".png"
    assert sample.image_path == raw / "IHC_TMA_dataset" / "images" / "tma_01.png"  # the file itself, not a copy
    assert [(r.label, r.box) for r in sample.regions] == [
        ("first channel nucleus", (2.0, 2.0, 6.0, 6.0)), ("first channel nucleus", (10.0, 2.0, 14.0, 6.0)),
        ("second channel nucleus", (20.0, 12.0, 26.0, 18.0))]
    stored = read_mask(sample.mask_path)
    assert region_mask(stored, sample.regions[2]).sum() == 36 and region_mask(stored, sample.regions[2])[12:18, 20:26].all()
    assert [(e.item, e.reason) for e in exclusions] == [
        ("IHC_TMA_dataset/masks/tma_02.npy", "the mask is 30x10 but its image is 30x20")]


def test_bad_per_file_arrays_are_one_sentence_each_and_the_rest_builds(tmp_path):
    raw = tmp_path / "raw"
    lynsec(raw)
    folder = raw / "lynsec 2"
    np.save(folder / "2_l2.npy", np.zeros((24, 32, 2)))          # two channels: the image needs three
    np.save(folder / "3_l2.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)  # needs pickle
    (folder / "4_l2.npy").write_bytes(b"not numpy")
    samples, exclusions = read_samples(make_manifest(LYNSEC_LAYOUT, labels={"nucleus": "cell nucleus"}, tasks=TASKS),
                                       raw, tmp_path / "cache")
    assert [s.source_path for s in samples] == ["lynsec 2/0_l2.npy"]
    reasons = {e.item: e.reason for e in exclusions}
    assert reasons["lynsec 2/2_l2.npy"] == "images: channel 2 is outside the 2 channels of an item of shape (24, 32, 2)"
    assert reasons["lynsec 2/3_l2.npy"].endswith("holds Python objects, which only pickle can read; the build never "
                                                 "unpickles downloaded files")
    assert reasons["lynsec 2/4_l2.npy"].startswith("4_l2.npy is not a readable .npy file")


@pytest.mark.parametrize("changes, message", [
    ({"axes": "NHWC"}, "items: file reads one image per file: axes is auto, HW, HWC, CHW or DHW"),
    ({"items": "stack", "axes": "HWC"}, "items: stack reads a stack: axes is auto, NHW"),
    ({"metadata": {"kind": {"file": "kinds.npy"}}}, "per-item metadata arrays belong to stacks"),
    ({"items": "stack", "axes": "auto"}, "channels and mask_axes are for items: file"),
    ({"images": {"file": "lynsec {n:d}/{stem}.npy", "channels": []}}, "at least 1 item"),
])
def test_per_file_array_fields_are_checked(changes, message):
    with pytest.raises(ValidationError, match=message):
        make_manifest({**LYNSEC_LAYOUT, **changes}, labels={"nucleus": "cell nucleus"}, tasks=TASKS)
