"""MRC and HDF5 volumes through the layout and the build's convert step: an MRC tomogram with its label tomogram
(MemBrain-seg's shape: `<name>.mrc` beside `<name>_labels.mrc`), and an HDF5 volume read by key; the section, its
mask and the boxes agree."""
from __future__ import annotations

import mrcfile
import numpy as np
from PIL import Image
from support.build_manifests import make_manifest

from mmbu.build.convert.base import ConvertOptions
from mmbu.build.convert.dispatch import read_image
from mmbu.build.layouts import read_samples
from mmbu.build.steps import convert_samples


def _write(path, data):
    path.parent.mkdir(parents=True, exist_ok=True)
    with mrcfile.new(str(path), overwrite=True) as mrc:
        mrc.set_data(data)
        mrc.voxel_size = 14.08


def test_a_tomogram_and_its_label_tomogram_build_aligned(tmp_path):
    raw = tmp_path / "raw"
    image = np.random.default_rng(2).normal(0, 1, (9, 20, 24)).astype(np.float32)
    labels = np.zeros(image.shape, np.int8)
    labels[6, 3:7, 4:12] = 1  # the largest labelled section is z=6
    labels[2, 10, 10] = 1
    image[labels == 1] = 8.0
    _write(raw / "tomograms" / "Tomo0001.mrc", image)
    _write(raw / "labels" / "Tomo0001_labels.mrc", labels)
    manifest = make_manifest({"kind": "image_mask_pairs", "images": "tomograms/*.mrc", "masks": "labels/*.mrc",
                              "mask_suffix": "_labels", "mask_values": {1: "membrane"}},
                             labels={"membrane": "membrane"}, tasks=["mask_grounded_classification"],
                             convert={"slice": "mask_max_area"})

    samples, exclusions = read_samples(manifest, raw)
    assert not exclusions and len(samples) == 1
    assert samples[0].part == "slice=mask_max_area" and samples[0].image_size == (24, 20)
    kept, conversions, dropped = convert_samples(samples, manifest, tmp_path / "work", "test")

    assert not dropped
    conversion = conversions[kept[0].sample_id]
    png = np.asarray(Image.open(conversion.png))
    mask = np.asarray(Image.open(conversion.mask_png))
    np.testing.assert_array_equal(mask, labels[6][::-1])  # y up, label values kept
    direct = read_image(raw / "tomograms" / "Tomo0001.mrc",
                        ConvertOptions(slice="mask_max_area", slice_mask=raw / "labels" / "Tomo0001_labels.mrc"))
    np.testing.assert_array_equal(png, direct.pixels)
    assert (png[mask == 1] == 255).all()
    (region,) = kept[0].regions
    assert region.label == "membrane" and region.box == (4.0, 13.0, 12.0, 17.0)  # rows 3..6 shown as 13..16
    assert conversion.record["params"]["z"] == 6


def test_an_hdf5_volume_slice_reaches_the_build_windowed_like_microscopy(tmp_path):
    """Platynereis-style HDF5 (float densities): the layout caches the slice losslessly, the convert step windows it
    by the 0.5-99.5 percentile rule, and the labels' boxes stay where the labels are."""
    import h5py

    from mmbu.build.convert.display import window_to_uint8

    raw = tmp_path / "raw"
    (raw / "nuclei").mkdir(parents=True)
    volume = np.random.default_rng(4).normal(0.5, 0.1, (6, 18, 22)).astype(np.float32)
    labels = np.zeros(volume.shape, np.uint32)
    labels[3, 2:8, 3:11] = 41
    with h5py.File(raw / "nuclei" / "train_data_nuclei_01.h5", "w") as f:
        f.create_dataset("volumes/raw", data=volume, chunks=(2, 9, 11), compression="gzip")
        f.create_dataset("volumes/labels/nucleus_instance_labels", data=labels, chunks=(2, 9, 11))
    manifest = make_manifest({"kind": "arrays", "items": "file", "axes": "DHW",
                              "images": {"file": "nuclei/train_data_nuclei_{n:d}.h5", "key": "volumes/raw"},
                              "masks": {"file": "nuclei/train_data_nuclei_{n:d}.h5",
                                        "key": "volumes/labels/nucleus_instance_labels"},
                              "instances": "ids", "instance_label": "nucleus"},
                             labels={"nucleus": "nucleus"}, tasks=["mask_grounded_classification"],
                             convert={"slice": "mask_max_area"})

    samples, exclusions = read_samples(manifest, raw)
    kept, conversions, dropped = convert_samples(samples, manifest, tmp_path / "work", "test")

    assert not exclusions and not dropped and len(kept) == 1
    png = np.asarray(Image.open(conversions[kept[0].sample_id].png))
    lo, hi = np.percentile(volume[3].astype(np.float64), [0.5, 99.5])
    np.testing.assert_array_equal(png, window_to_uint8(volume[3].astype(np.float64), float(lo), float(hi)))
    (region,) = kept[0].regions
    assert region.box == (3.0, 2.0, 11.0, 8.0)  # HDF5 rows top-down: no flip
