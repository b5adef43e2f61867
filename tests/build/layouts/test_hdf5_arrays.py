"""HDF5 datasets named by key (`arrays`, `items: file`, `axes: DHW`), written by h5py.

The files mimic Platynereis SBEM's nuclei set (torch-em `platynereis.py`: `nuclei/train_data_nuclei_01.h5` with
`volumes/raw` and `volumes/labels/nucleus_instance_labels`): chunked, compressed (z, y, x) volumes whose slice is
read alone. HDF5 arrays have no display convention of their own: row 0 of the slice is the top row, as napari
and BigDataViewer-based tools show them.
"""
from __future__ import annotations

import h5py
import numpy as np
import pytest
from PIL import Image
from support.build_manifests import make_manifest

from mmbu.build.layouts import read_mask, read_samples
from mmbu.build.layouts.array_files import ArrayFileError, open_array

RAW_KEY = "volumes/raw"
NUCLEI_KEY = "volumes/labels/nucleus_instance_labels"
LAYOUT = {"kind": "arrays", "items": "file", "axes": "DHW",
          "images": {"file": "nuclei/train_data_nuclei_{n:d}.h5", "key": RAW_KEY},
          "masks": {"file": "nuclei/train_data_nuclei_{n:d}.h5", "key": NUCLEI_KEY},
          "instances": "ids", "instance_label": "nucleus"}


def platynereis_like(path, depth=10, dtype=np.uint8):
    rng = np.random.default_rng(11)
    raw = rng.integers(0, 200, (depth, 24, 32)).astype(dtype)
    if dtype == np.float32:
        raw *= np.float32(0.37)  # fractional densities
    labels = np.zeros(raw.shape, np.uint32)
    labels[7, 2:6, 3:9] = 17  # two nuclei in section 7 (the largest labelled one), one in section 1
    labels[7, 12:20, 20:30] = 42
    labels[1, 1:3, 1:3] = 5
    labels[5, 10:12, 10:12] = 3  # a small one in the middle section (5 of 10)
    path.parent.mkdir(parents=True, exist_ok=True)
    with h5py.File(path, "w") as f:
        f.create_dataset(RAW_KEY, data=raw, chunks=(4, 8, 8), compression="gzip")
        f.create_dataset(NUCLEI_KEY, data=labels, chunks=(4, 8, 8), compression="gzip")
    return raw, labels


def _read(raw_dir, tmp_path, convert=None, layout=LAYOUT):
    manifest = make_manifest(layout, labels={"nucleus": "nucleus"}, tasks=["mask_grounded_classification"],
                             convert=convert or {})
    return read_samples(manifest, raw_dir, tmp_path / "cache")


@pytest.mark.parametrize("convert, z, how", [({}, 5, "middle"), ({"z": 2}, 2, "convert.z"),
                                             ({"slice": "mask_max_area"}, 7, "mask_max_area")])
def test_one_slice_of_image_and_labels_is_read_by_key(tmp_path, convert, z, how):
    raw_dir = tmp_path / "raw"
    raw, labels = platynereis_like(raw_dir / "nuclei" / "train_data_nuclei_01.h5")
    samples, exclusions = _read(raw_dir, tmp_path, convert)

    if z == 2:  # no nucleus in section 2: the item is excluded, not shown without its labels
        assert samples == [] and "no annotated object" in exclusions[0].reason
        return
    (sample,) = samples
    assert exclusions == []
    assert sample.part == f"key={RAW_KEY};z={z}" and sample.image_size == (32, 24)
    np.testing.assert_array_equal(np.asarray(Image.open(sample.image_path)), raw[z])  # row 0 on top, no flip
    np.testing.assert_array_equal(read_mask(sample.mask_path) > 0, labels[z] > 0)
    assert sample.provenance["slice"] == f"z {z} of 10 ({how})"
    assert "read a slice at a time (chunks (4, 8, 8), gzip)" in sample.provenance["images"]
    if z == 7:
        assert sorted(r.box for r in sample.regions) == [(3.0, 2.0, 9.0, 6.0), (20.0, 12.0, 30.0, 20.0)]


def test_float_volumes_reach_the_cache_losslessly(tmp_path):
    raw_dir = tmp_path / "raw"
    raw, _ = platynereis_like(raw_dir / "nuclei" / "train_data_nuclei_02.h5", dtype=np.float32)
    (sample,) = _read(raw_dir, tmp_path, {"slice": "mask_max_area"})[0]
    import tifffile

    np.testing.assert_array_equal(tifffile.imread(sample.image_path), raw[7])  # windowed later, by the converter


def test_only_the_chosen_slice_is_read(tmp_path):
    path = tmp_path / "big.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("volumes/raw", shape=(400, 512, 512), dtype=np.uint8, chunks=(1, 512, 512),
                         compression="gzip")
    array = open_array(path, "volumes/raw")
    try:
        assert array.item(200).shape == (512, 512) and array.items(3, 5).shape == (2, 512, 512)
        assert array.access == "HDF5, read a slice at a time (chunks (1, 512, 512), gzip)"
    finally:
        array.close()


def test_a_missing_key_or_a_shape_mismatch_is_one_exclusion(tmp_path):
    raw_dir = tmp_path / "raw"
    platynereis_like(raw_dir / "nuclei" / "train_data_nuclei_01.h5")
    layout = {**LAYOUT, "masks": {**LAYOUT["masks"], "key": "volumes/labels/nucleus_instance_label"}}
    samples, exclusions = _read(raw_dir, tmp_path, layout=layout)
    assert samples == []
    assert [e.reason for e in exclusions] == [
        "nuclei/train_data_nuclei_01.h5 has no array 'volumes/labels/nucleus_instance_label'; did you mean "
        "'volumes/labels/nucleus_instance_labels'?"]
    with h5py.File(raw_dir / "nuclei" / "train_data_nuclei_03.h5", "w") as f:
        f.create_dataset(RAW_KEY, data=np.zeros((4, 8, 8), np.uint8))
        f.create_dataset(NUCLEI_KEY, data=np.ones((4, 8, 9), np.uint8))
    _, exclusions = _read(raw_dir, tmp_path)
    assert exclusions[-1].reason == "the mask volume is 4x8x9 but its image is 4x8x8"


def test_keys_never_leave_the_file(tmp_path):
    outside = tmp_path / "outside.h5"
    with h5py.File(outside, "w") as f:
        f.create_dataset("secret", data=np.ones((2, 4, 4), np.uint8))
    inside = tmp_path / "raw" / "volume.h5"
    inside.parent.mkdir()
    with h5py.File(inside, "w") as f:
        f.create_dataset("volumes/raw", data=np.zeros((2, 4, 4), np.uint8))
        f["volumes/linked"] = h5py.ExternalLink(str(outside), "secret")
        f["volumes/alias"] = h5py.SoftLink("/volumes/linked")
        layout = h5py.VirtualLayout(shape=(2, 4, 4), dtype=np.uint8)
        layout[:] = h5py.VirtualSource(str(outside), "secret", shape=(2, 4, 4))
        f.create_virtual_dataset("volumes/virtual", layout)
        f.create_dataset("volumes/external", shape=(2, 4, 4), dtype=np.uint8, external=[(str(outside), 0, 32)])
    for key, reason in [("volumes/linked", "goes through an external link to"),
                        ("volumes/alias", "'/volumes/linked' goes through an external link to"),
                        ("volumes/virtual", "is a virtual dataset built from other files"),
                        ("volumes/external", "keeps its data in external files"),
                        ("../outside.h5/secret", "is not a dataset key inside the file"),
                        ("volumes", "is a group, not a dataset")]:
        with pytest.raises(ArrayFileError, match=reason):
            open_array(inside, key)
    with pytest.raises(ArrayFileError, match="is an HDF5 file; name its dataset with `key`"):
        open_array(inside)
    array = open_array(inside, "volumes/raw")
    array.close()
    (tmp_path / "raw" / "broken.h5").write_bytes(b"\x89HDF\r\n\x1a\n" + b"\0" * 64)
    with pytest.raises(ArrayFileError, match=r"broken\.h5 is not a readable HDF5 file"):
        open_array(tmp_path / "raw" / "broken.h5", "volumes/raw")


def test_a_stack_of_2d_images_in_hdf5_reads_item_by_item(tmp_path):
    raw_dir = tmp_path / "raw"
    raw_dir.mkdir()
    images = np.random.default_rng(1).integers(0, 255, (3, 6, 5), dtype=np.uint8)
    with h5py.File(raw_dir / "cells.h5", "w") as f:
        f["images"] = images
        f["labels"] = np.array([0, 1, 0], np.uint8)
    manifest = make_manifest({"kind": "arrays", "images": {"file": "cells.h5", "key": "images"},
                              "labels": {"file": "cells.h5", "key": "labels"}, "class_names": ["a", "b"]},
                             labels={"a": "a", "b": "b"})
    samples, exclusions = read_samples(manifest, raw_dir, tmp_path / "cache")
    assert not exclusions and [s.label for s in samples] == ["a", "b", "a"]
    np.testing.assert_array_equal(np.asarray(Image.open(samples[1].image_path)), images[1])


def test_a_leading_any_folder_glob_reads_the_labels_beside_the_image_with_or_without_a_top_folder(tmp_path):
    # the masks template keeps `**/` after its parts are filled: it is looked up among the fetched files
    raw_dir = tmp_path / "raw"
    platynereis_like(raw_dir / "nuclei" / "train_data_nuclei_01.h5")
    platynereis_like(raw_dir / "archive-top" / "nuclei" / "train_data_nuclei_02.h5")
    layout = {**LAYOUT, "images": {"file": "**/nuclei/train_data_nuclei_{n:d}.h5", "key": RAW_KEY},
              "masks": {"file": "**/nuclei/train_data_nuclei_{n:d}.h5", "key": NUCLEI_KEY}}
    samples, exclusions = _read(raw_dir, tmp_path, layout=layout)

    assert exclusions == []
    assert sorted(s.provenance["masks"].split(":")[0] for s in samples) == [
        "archive-top/nuclei/train_data_nuclei_02.h5", "nuclei/train_data_nuclei_01.h5"]


def test_two_files_a_glob_template_could_mean_are_one_sentence_not_a_guess(tmp_path):
    raw_dir = tmp_path / "raw"
    platynereis_like(raw_dir / "nuclei" / "train_data_nuclei_01.h5")
    platynereis_like(raw_dir / "copy" / "labels" / "train_data_nuclei_01.h5")
    platynereis_like(raw_dir / "other" / "labels" / "train_data_nuclei_01.h5")
    layout = {**LAYOUT, "masks": {"file": "**/labels/train_data_nuclei_{n:d}.h5", "key": NUCLEI_KEY}}
    samples, exclusions = _read(raw_dir, tmp_path, layout=layout)

    assert samples == []
    (exclusion,) = exclusions
    assert "matches 2 files" in exclusion.reason and "ambiguous" in exclusion.reason
