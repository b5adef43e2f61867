"""NIfTI pairs: regions come from the mask slice the real converter picked, in the PNG's frame."""
from __future__ import annotations

import nibabel as nib
import numpy as np
from support.build_manifests import make_manifest

from mmbu.build.convert.base import ConvertOptions
from mmbu.build.convert.nifti import read as read_nifti
from mmbu.build.layouts import read_samples, with_converted_mask


def test_regions_of_a_volume_are_read_from_the_converted_slice(tmp_path):
    raw = tmp_path / "raw"
    (raw / "images").mkdir(parents=True)
    (raw / "masks").mkdir()
    labels = np.zeros((20, 16, 6), np.uint8)
    labels[2:6, 3:5, 4] = 1  # the largest slice is z=4
    labels[10:15, 8:12, 4] = 2
    labels[1:3, 1:3, 1] = 1
    labels[0, 0, 4] = 9  # a value the manifest does not know
    affine = np.diag([1.0, 1.0, 3.0, 1.0])
    nib.save(nib.Nifti1Image(np.random.default_rng(1).normal(size=labels.shape).astype(np.float32), affine),
             raw / "images" / "case.nii.gz")
    nib.save(nib.Nifti1Image(labels, affine), raw / "masks" / "case_mask.nii.gz")
    manifest = make_manifest({"kind": "image_mask_pairs", "images": "images/*.nii.gz", "masks": "masks/*.nii.gz",
                              "mask_suffix": "_mask", "mask_values": {1: "gland", 2: "stroma"}},
                             labels={"gland": "gland", "stroma": "stroma"}, tasks=["mask_grounded_classification"],
                             convert={"slice": "mask_max_area"})
    samples, _ = read_samples(manifest, raw)
    converted = read_nifti(samples[0].mask_path, ConvertOptions(as_mask=True, slice="mask_max_area"))

    sample, exclusions = with_converted_mask(samples[0], converted.pixels, manifest)

    assert converted.pixels.shape == (16, 20)  # axial slice shown transposed: rows = y, columns = x
    assert [r.label for r in sample.regions] == ["gland", "stroma"]
    for region in sample.regions:
        x1, y1, x2, y2 = (int(v) for v in region.box)
        inside = converted.pixels[y1:y2, x1:x2] == region.mask_value
        assert inside.sum() == (converted.pixels == region.mask_value).sum()  # the box holds the whole region
    assert (sample.regions[0].box[2] - sample.regions[0].box[0], sample.regions[0].box[3] - sample.regions[0].box[1]) \
        == (4.0, 2.0)  # 4 voxels along x, 2 along y
    assert sample.image_size == (20, 16)
    assert [e.item for e in exclusions] == ["images/case.nii.gz#v9"]


def _float_mask_pair(raw, mask: np.ndarray) -> None:
    (raw / "images").mkdir(parents=True)
    (raw / "masks").mkdir()
    affine = np.eye(4)
    nib.save(nib.Nifti1Image(np.zeros(mask.shape, np.float32), affine), raw / "images" / "case.nii.gz")
    nib.save(nib.Nifti1Image(mask, affine), raw / "masks" / "case_mask.nii.gz")


def _pairs_manifest():
    return make_manifest({"kind": "image_mask_pairs", "images": "images/*.nii.gz", "masks": "masks/*.nii.gz",
                          "mask_suffix": "_mask", "mask_values": {1: "gland", 2: "stroma"}},
                         labels={"gland": "gland", "stroma": "stroma"}, tasks=["mask_grounded_classification"],
                         convert={"slice": "mask_max_area"})


def test_a_float_mask_with_whole_values_reads_as_its_labels(tmp_path):
    mask = np.zeros((8, 8, 3), np.float32)
    mask[1:3, 1:3, 1] = 1.0
    mask[5:7, 5:7, 1] = 2.0
    _float_mask_pair(tmp_path / "raw", mask)

    samples, exclusions = read_samples(_pairs_manifest(), tmp_path / "raw")

    assert exclusions == []
    assert sorted(r.label for r in samples[0].regions) == ["gland", "stroma"]
    assert sorted(r.mask_value for r in samples[0].regions) == [1, 2]


def test_a_resliced_float_mask_is_excluded_rather_than_truncated(tmp_path):
    mask = np.zeros((8, 8, 3), np.float32)
    mask[1:3, 1:3, 1] = 1.0
    mask[3, 1:3, 1] = 0.4  # an interpolated edge: int() would make it background, 1.7 would become 1
    mask[5:7, 5:7, 1] = 1.7
    _float_mask_pair(tmp_path / "raw", mask)

    samples, exclusions = read_samples(_pairs_manifest(), tmp_path / "raw")

    assert samples == []
    assert [e.item for e in exclusions] == ["masks/case_mask.nii.gz"]
    assert "case_mask.nii.gz: the mask holds values that are not whole label numbers (0.4, 1.7)" in exclusions[0].reason
    assert "case_mask.nii.gz" in exclusions[0].reason
