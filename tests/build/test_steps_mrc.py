"""An MRC tomogram with its label tomogram (MemBrain-seg's shape: `<name>.mrc` beside `<name>_labels.mrc`)
goes through the layout and the build's convert step: the section, its mask and the boxes agree."""
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
    assert samples[0].frame == "slice=mask_max_area" and samples[0].image_size == (24, 20)
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
