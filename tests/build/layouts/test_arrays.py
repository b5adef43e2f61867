"""arrays: NumPy stacks read item by item (MedMNIST .npz, PanNuke .npy), images and masks exact."""
from __future__ import annotations

import tracemalloc
import zipfile

import numpy as np
import pytest
from PIL import Image
from pydantic import ValidationError
from support.build_manifests import make_manifest

from mmbu.build.layouts import read_mask, read_samples, region_mask
from mmbu.build.layouts.array_files import open_array

PATH_LABELS = {str(i): name for i, name in enumerate(
    ["adipose tissue", "background", "debris", "lymphocytes", "mucus", "smooth muscle", "normal colon mucosa",
     "cancer-associated stroma", "colorectal adenocarcinoma epithelium"])}


def medmnist(path, compressed=True, train=4, test=2, labels_shape=(1,)):
    """A MedMNIST v3 subset file: `<flag>.npz` with `<split>_images` (N, 28, 28, 3) uint8 and
    `<split>_labels` (N, 1) (MedMNIST/MedMNIST@805b74237fb5bd2db376fd94e50646b6a8905d9d:medmnist/dataset.py,
    medmnist/info.py `pathmnist`)."""
    rng = np.random.default_rng(7)
    arrays = {}
    for split, count in (("train", train), ("val", 1), ("test", test)):
        arrays[f"{split}_images"] = rng.integers(0, 256, (count, 28, 28, 3), dtype=np.uint8)
        arrays[f"{split}_labels"] = (np.arange(count, dtype=np.uint8) % 9).reshape(count, *labels_shape)
    path.parent.mkdir(parents=True, exist_ok=True)
    (np.savez_compressed if compressed else np.savez)(path, **arrays)
    return arrays


MEDMNIST_LAYOUT = {"kind": "arrays", "images": {"file": "pathmnist.npz", "key": "{split}_images"},
                   "labels": {"file": "pathmnist.npz", "key": "{split}_labels"}}


@pytest.mark.parametrize("compressed, access", [(True, "streamed"), (False, "memory-mapped")])
def test_medmnist_npz_items_become_samples_with_exact_pixels(tmp_path, compressed, access):
    raw = tmp_path / "raw"
    arrays = medmnist(raw / "pathmnist.npz", compressed)
    samples, exclusions = read_samples(make_manifest(MEDMNIST_LAYOUT, labels=PATH_LABELS), raw, tmp_path / "cache")

    assert exclusions == []
    assert [(s.part, s.label) for s in samples][:5] == [
        ("key=test_images;index=0", "0"), ("key=test_images;index=1", "1"), ("key=train_images;index=0", "0"),
        ("key=train_images;index=1", "1"), ("key=train_images;index=2", "2")]
    assert len(samples) == 7 and all(s.source_path == "pathmnist.npz" for s in samples)
    for sample in samples:
        key, index = sample.part.split(";")
        expected = arrays[key.split("=")[1]][int(index.split("=")[1])]
        assert np.array_equal(np.asarray(Image.open(sample.image_path)), expected)
        assert sample.image_size == (28, 28)
    assert samples[0].provenance["images"] == f"pathmnist.npz:test_images ({access})"


def test_ids_are_stable_and_a_split_filter_keeps_them(tmp_path):
    raw = tmp_path / "raw"
    medmnist(raw / "pathmnist.npz")
    manifest = make_manifest(MEDMNIST_LAYOUT, labels=PATH_LABELS)
    every, _ = read_samples(manifest, raw, tmp_path / "cache")
    stamp = every[0].image_path.stat().st_mtime_ns
    test_only, _ = read_samples(make_manifest({**MEDMNIST_LAYOUT, "splits": ["test"]}, labels=PATH_LABELS), raw,
                                tmp_path / "cache")
    assert {s.sample_id for s in test_only} == {s.sample_id for s in every if "test_" in s.part}
    assert every[0].image_path.stat().st_mtime_ns == stamp  # not rewritten: the converter's cache holds


def test_bad_label_indices_missing_keys_and_pickled_arrays_are_exclusions(tmp_path):
    raw = tmp_path / "raw"
    medmnist(raw / "pathmnist.npz")
    names = ["adipose", "background", "debris"]  # indices 3..8 fall outside
    samples, exclusions = read_samples(make_manifest({**MEDMNIST_LAYOUT, "class_names": names, "splits": ["train"]},
                                                     labels={n: n for n in names}), raw, tmp_path / "cache")
    assert [s.label for s in samples] == ["adipose", "background", "debris"]
    assert [(e.item, e.reason) for e in exclusions] == [
        ("pathmnist.npz#key=train_images;index=3", "label index 3 is outside class_names (0..2)")]

    misspelt = {**MEDMNIST_LAYOUT, "labels": {"file": "pathmnist.npz", "key": "{split}_label"}}
    samples, exclusions = read_samples(make_manifest(misspelt, labels=PATH_LABELS), raw, tmp_path / "cache")
    assert samples == [] and exclusions[0].reason == ("pathmnist.npz has no array 'test_label'; did you mean "
                                                      "'test_labels'?")

    np.save(raw / "objects.npy", np.array([{"a": 1}, None], dtype=object), allow_pickle=True)
    samples, exclusions = read_samples(make_manifest({"kind": "arrays", "images": "objects.npy", "labels": "objects.npy"},
                                                     labels=PATH_LABELS), raw, tmp_path / "cache")
    assert samples == [] and "the build never unpickles" in exclusions[0].reason


def test_multi_hot_rows_keep_single_finding_items(tmp_path):
    """ChestMNIST: `<split>_labels` (N, 14), multi-label binary (medmnist/info.py `chestmnist`)."""
    raw = tmp_path / "raw"
    rows = np.zeros((4, 14), np.uint8)
    rows[0, 1] = 1
    rows[1, [1, 2]] = 1
    np.savez_compressed(raw.mkdir() or raw / "chestmnist.npz", test_images=np.zeros((4, 28, 28), np.uint8),
                        test_labels=rows)
    names = ["atelectasis", "cardiomegaly", "effusion", "infiltration", "mass", "nodule", "pneumonia",
             "pneumothorax", "consolidation", "edema", "emphysema", "fibrosis", "pleural", "hernia"]
    layout = {"kind": "arrays", "images": {"file": "chestmnist.npz", "key": "test_images"},
              "labels": {"file": "chestmnist.npz", "key": "test_labels"}, "class_names": names, "no_finding": "normal"}
    samples, exclusions = read_samples(make_manifest(layout, labels={"cardiomegaly": "enlarged heart", "normal": "normal",
                                                                     **{n: n for n in names}}), raw, tmp_path / "cache")
    assert [s.label for s in samples] == ["cardiomegaly", "normal", "normal"]
    assert exclusions[0].item == "chestmnist.npz#key=test_images;index=1" and "(cardiomegaly, effusion)" in exclusions[0].reason


PANNUKE_CHANNELS = ["neoplastic", "inflammatory", "connective", "dead", "epithelial", None]
PANNUKE_LABELS = {"neoplastic": "neoplastic cell", "inflammatory": "inflammatory cell", "connective": "connective tissue cell",
                  "dead": "dead cell", "epithelial": "epithelial cell", "Breast": "breast", "Colon": "colon"}


def pannuke(raw, fold=1):
    """PanNuke fold: `Fold 1/images/fold1/images.npy` (N, 256, 256, 3) float64, `Fold 1/images/fold1/types.npy`
    (tissue names), `Fold 1/masks/fold1/masks.npy` (N, 256, 256, 6): channels 0-4 instance ids of neoplastic,
    inflammatory, connective/soft tissue, dead and epithelial cells, channel 5 background
    (constantinpape/torch-em@6f71247c0bde24cb050bb25501ca61517ce08b7f:torch_em/data/datasets/histopathology/pannuke.py;
    open-mmlab/mmsegmentation@4d2c27bfd9eafd0c5d39bd2673a34023e6dffbfa:
    projects/medical/2d_image/histopathology/pannuke/tools/prepare_dataset.py). Smaller than 256 here."""
    images = np.random.default_rng(3).integers(0, 256, (3, 32, 40, 3)).astype(np.float64)
    masks = np.zeros((3, 32, 40, 6), np.float64)
    masks[0, 2:8, 3:9, 0] = 17        # a neoplastic nucleus, instance id 17
    masks[0, 20:26, 30:36, 0] = 18    # another
    masks[0, 10:14, 10:20, 1] = 4     # an inflammatory cell
    masks[1, 5:7, 5:7, 4] = 2         # an epithelial cell
    masks[..., 5] = (masks[..., :5].sum(-1) == 0)  # background channel
    folder = raw / f"Fold {fold}"
    for sub, name, array in (("images", "images.npy", images), ("masks", "masks.npy", masks),
                             ("images", "types.npy", np.array(["Breast", "Colon", "Breast"]))):
        (folder / sub / f"fold{fold}").mkdir(parents=True, exist_ok=True)
        np.save(folder / sub / f"fold{fold}" / name, array)
    return images, masks


PANNUKE_LAYOUT = {"kind": "arrays", "images": "Fold {fold}/images/fold{fold}/images.npy",
                  "masks": "Fold {fold}/masks/fold{fold}/masks.npy", "mask_channels": PANNUKE_CHANNELS}


def test_pannuke_channels_of_instance_ids_become_regions_with_exact_masks(tmp_path):
    raw = tmp_path / "raw"
    images, masks = pannuke(raw)
    samples, exclusions = read_samples(make_manifest(PANNUKE_LAYOUT, labels=PANNUKE_LABELS, tasks=[
        "mask_grounded_classification", "box_grounded_classification", "object_detection"]), raw, tmp_path / "cache")

    assert [s.part for s in samples] == ["index=0", "index=1"]
    assert [e.item for e in exclusions] == ["Fold 1/images/fold1/images.npy#index=2"]  # no nucleus in it
    first = samples[0]
    assert [(r.label, r.instance, r.box) for r in first.regions] == [
        ("neoplastic", "c0-id17", (3.0, 2.0, 9.0, 8.0)), ("neoplastic", "c0-id18", (30.0, 20.0, 36.0, 26.0)),
        ("inflammatory", "c1-id4", (10.0, 10.0, 20.0, 14.0))]
    assert np.array_equal(np.asarray(Image.open(first.image_path)), images[0].astype(np.uint8))
    assert "stored as 8-bit (lossless)" in first.provenance["cast"]
    ids = read_mask(first.mask_path)
    for region, channel, value in zip(first.regions, (0, 0, 1), (17, 18, 4)):
        assert np.array_equal(region_mask(ids, region), masks[0, ..., channel] == value)


def test_pannuke_tissue_types_as_image_labels(tmp_path):
    raw = tmp_path / "raw"
    pannuke(raw)
    np.save(raw / "Fold 1" / "images" / "fold1" / "types.npy", np.array([b"Breast", b"Colon", b"Breast"]))  # bytes too
    layout = {**PANNUKE_LAYOUT, "labels": "Fold {fold}/images/fold{fold}/types.npy"}
    samples, _ = read_samples(make_manifest(layout, labels=PANNUKE_LABELS, tasks=["ungrounded_classification"]), raw,
                              tmp_path / "cache")
    assert [(s.part, s.label, len(s.regions)) for s in samples] == [
        ("index=0", "Breast", 3), ("index=1", "Colon", 1), ("index=2", "Breast", 0)]


def test_channel_count_and_item_count_mismatches_exclude_the_group(tmp_path):
    raw = tmp_path / "raw"
    pannuke(raw)
    samples, exclusions = read_samples(make_manifest({**PANNUKE_LAYOUT, "mask_channels": PANNUKE_CHANNELS[:5]},
                                                     labels=PANNUKE_LABELS, tasks=["mask_grounded_classification"]),
                                       raw, tmp_path / "cache")
    assert samples == [] and exclusions[0].reason == ("the masks (Fold 1/masks/fold1/masks.npy) have 6 channel(s) but "
                                                      "mask_channels names 5")
    np.save(raw / "Fold 1" / "images" / "fold1" / "types.npy", np.array(["Breast"]))
    layout = {**PANNUKE_LAYOUT, "labels": "Fold {fold}/images/fold{fold}/types.npy"}
    samples, exclusions = read_samples(make_manifest(layout, labels=PANNUKE_LABELS), raw, tmp_path / "cache")
    assert samples == [] and "hold 3 items but labels (Fold 1/images/fold1/types.npy) holds 1" in exclusions[0].reason


def test_volume_items_are_cut_at_the_slice_the_manifest_picks(tmp_path):
    """OrganMNIST3D-style `<split>_images` (N, 28, 28, 28) (medmnist/info.py `organmnist3d`)."""
    raw = tmp_path / "raw"
    raw.mkdir()
    volumes = np.random.default_rng(1).integers(0, 256, (2, 6, 10, 12), dtype=np.uint8)
    np.savez_compressed(raw / "organmnist3d.npz", test_images=volumes, test_labels=np.array([[0], [1]]))
    layout = {"kind": "arrays", "images": {"file": "organmnist3d.npz", "key": "test_images"},
              "labels": {"file": "organmnist3d.npz", "key": "test_labels"}, "axes": "NDHW"}
    samples, _ = read_samples(make_manifest(layout, labels={"0": "liver", "1": "kidney"}), raw, tmp_path / "cache")
    assert [s.provenance["slice"] for s in samples] == ["depth index 3 of 6"] * 2
    assert np.array_equal(np.asarray(Image.open(samples[1].image_path)), volumes[1, 3])


def test_a_large_npy_is_read_one_item_at_a_time(tmp_path):
    """A 3 GiB stack (sparse on disk) costs one item of memory, in any order."""
    path = tmp_path / "big.npy"
    stack = np.lib.format.open_memmap(path, mode="w+", dtype=np.uint8, shape=(3072, 1024, 1024))
    stack[2000, 5, 7] = 9
    del stack
    tracemalloc.start()
    array = open_array(path)
    items = [array.item(i) for i in (2000, 3, 3071)]
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert items[0][5, 7] == 9 and array.access == "memory-mapped"
    assert peak < 8 * 2**20  # three 1 MiB items, not 3 GiB


def test_a_compressed_member_is_streamed_in_bounded_memory(tmp_path):
    """A deflated .npz member (np.savez_compressed) of 256 MiB is decompressed forward, one item at a time."""
    path = tmp_path / "big.npz"
    shape = (256, 1024, 1024)
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        with archive.open("images.npy", "w", force_zip64=True) as member:
            np.lib.format.write_array_header_1_0(member, {"descr": "|u1", "fortran_order": False, "shape": shape})
            for index in range(shape[0]):
                member.write(np.full(shape[1:], index % 251, np.uint8).tobytes())
    tracemalloc.start()
    array = open_array(path, "images")
    values = [int(array.item(i)[0, 0]) for i in (0, 200, 255, 10)]  # the last one starts the stream again
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert values == [0, 200, 4, 10] and array.access == "streamed"
    assert peak < 40 * 2**20
    array.close()


@pytest.mark.parametrize("layout, message", [
    ({"images": "a.npy"}, "needs labels, masks or both"),
    ({"images": "a.npy", "labels": "{split}.npy"}, "does not name"),
    ({"images": "a.npy", "masks": "m.npy"}, "masks need mask_channels"),
    ({"images": "a.npy", "labels": "l.npy", "splits": ["test"]}, "names none"),
])
def test_arrays_fields_are_checked(layout, message):
    with pytest.raises(ValidationError, match=message):
        make_manifest({"kind": "arrays", **layout}, labels=PATH_LABELS)
