"""Image/mask pairs: PNG, TIFF and NIfTI masks; values, connected components and instance ids."""
from __future__ import annotations

import io

import nibabel as nib
import numpy as np
import tifffile
from PIL import Image
from support.build_manifests import make_manifest, write_png

from mmbu.build.layouts import mask_png, read_mask, read_samples, region_mask

LABELS = {"gland": "gland", "stroma": "stroma", "nucleus": "nucleus"}


def semantic_mask() -> np.ndarray:
    mask = np.zeros((24, 32), np.uint8)
    mask[2:6, 3:9] = 1  # gland, first component
    mask[15:20, 20:30] = 1  # gland, second component
    mask[10:12, 10:12] = 2  # stroma
    mask[0, 31] = 7  # a value that is not in mask_values
    return mask


def layout(**extra):
    return {"kind": "image_mask_pairs", "images": "images/*.png", "masks": "masks/*", "mask_suffix": "_mask",
            "mask_values": {1: "gland", 2: "stroma"}, **extra}


def test_semantic_png_mask_gives_one_region_per_value_and_flags_unknown_values(tmp_path):
    raw = tmp_path / "raw"
    write_png(raw / "images" / "a.png")
    (raw / "masks").mkdir()
    Image.fromarray(semantic_mask()).save(raw / "masks" / "a_mask.png")
    manifest = make_manifest(layout(), labels=LABELS, tasks=["mask_grounded_classification"])

    samples, exclusions = read_samples(manifest, raw)

    regions = samples[0].regions
    assert [(r.label, r.instance, r.box) for r in regions] == [
        ("gland", "v1", (3.0, 2.0, 30.0, 20.0)), ("stroma", "v2", (10.0, 10.0, 12.0, 12.0))]
    assert samples[0].mask_path == raw / "masks" / "a_mask.png"
    assert [e.item for e in exclusions] == ["images/a.png#v7"]
    assert "object label '7' is not in the manifest" in exclusions[0].reason


def test_connected_components_split_a_value_into_objects_with_their_own_masks(tmp_path):
    raw = tmp_path / "raw"
    write_png(raw / "images" / "a.png")
    (raw / "masks").mkdir()
    Image.fromarray(semantic_mask()).save(raw / "masks" / "a_mask.png")
    manifest = make_manifest(layout(instances=True, min_region_pixels=2), labels=LABELS,
                             tasks=["box_grounded_classification"])

    samples, exclusions = read_samples(manifest, raw)

    regions = samples[0].regions
    assert [(r.instance, r.box) for r in regions] == [
        ("v1-c1", (3.0, 2.0, 9.0, 6.0)), ("v1-c2", (20.0, 15.0, 30.0, 20.0)), ("v2-c1", (10.0, 10.0, 12.0, 12.0))]
    assert exclusions == []  # value 7 is a single pixel, under min_region_pixels: a speck, not an object
    source = read_mask(samples[0].mask_path)
    second = region_mask(source, regions[1])
    assert second.sum() == 5 * 10 and second[15:20, 20:30].all() and not second[2:6, 3:9].any()
    png = np.asarray(Image.open(io.BytesIO(mask_png(second))))
    assert png.dtype == np.uint8 and set(np.unique(png)) == {0, 255} and png[16, 21] == 255 and png[3, 4] == 0


def test_sixteen_bit_tiff_instance_ids(tmp_path):
    raw = tmp_path / "raw"
    write_png(raw / "images" / "cells.png")
    ids = np.zeros((24, 32), np.uint16)
    ids[1:4, 1:4] = 300
    ids[10:14, 20:25] = 1200
    (raw / "masks").mkdir()
    tifffile.imwrite(raw / "masks" / "cells_mask.tif", ids)
    manifest = make_manifest(layout(instances="ids", instance_label="nucleus", mask_values={}), labels=LABELS,
                             tasks=["mask_grounded_classification"])

    samples, _ = read_samples(manifest, raw)

    assert [(r.label, r.instance, r.box) for r in samples[0].regions] == [
        ("nucleus", "id-300", (1.0, 1.0, 4.0, 4.0)), ("nucleus", "id-1200", (20.0, 10.0, 25.0, 14.0))]


def test_wrong_size_masks_orphans_and_missing_masks_are_excluded(tmp_path):
    raw = tmp_path / "raw"
    write_png(raw / "images" / "a.png", size=(32, 24))
    write_png(raw / "images" / "b.png")
    (raw / "masks").mkdir()
    Image.fromarray(np.ones((10, 10), np.uint8)).save(raw / "masks" / "a_mask.png")
    Image.fromarray(np.ones((24, 32), np.uint8)).save(raw / "masks" / "zzz_mask.png")
    manifest = make_manifest(layout(), labels=LABELS, tasks=["mask_grounded_classification"])

    samples, exclusions = read_samples(manifest, raw)

    assert samples == []
    reasons = {e.item: e.reason for e in exclusions}
    assert reasons["masks/a_mask.png"] == "the mask is 10x10 but its image is 32x24"
    assert reasons["images/b.png"].startswith("no mask matching")
    assert reasons["masks/zzz_mask.png"] == "mask without a matching image"


def test_nifti_label_volume_pairs_check_grids_and_list_present_values(tmp_path):
    raw = tmp_path / "raw"
    (raw / "images").mkdir(parents=True)
    (raw / "masks").mkdir()
    affine = np.diag([0.8, 0.8, 2.5, 1.0])
    volume = np.random.default_rng(0).normal(size=(16, 12, 5)).astype(np.float32)
    labels = np.zeros((16, 12, 5), np.uint8)
    labels[4:8, 3:6, 2] = 2
    nib.save(nib.Nifti1Image(volume, affine), raw / "images" / "case1.nii.gz")
    nib.save(nib.Nifti1Image(labels, affine), raw / "masks" / "case1_mask.nii.gz")
    nib.save(nib.Nifti1Image(volume, affine), raw / "images" / "case2.nii.gz")
    nib.save(nib.Nifti1Image(labels[:, :, :4], affine), raw / "masks" / "case2_mask.nii.gz")
    manifest = make_manifest(layout(images="images/*.nii.gz"), labels=LABELS,
                             tasks=["mask_grounded_classification"], convert={"slice": "mask_max_area"})

    samples, exclusions = read_samples(manifest, raw)

    assert [s.source_path for s in samples] == ["images/case1.nii.gz"]
    assert samples[0].part == "slice=mask_max_area;axis=2"
    assert [(r.label, r.mask_value, r.box) for r in samples[0].regions] == [("stroma", 2, None)]
    assert exclusions[0].reason == "the mask volume is 16x12x4 but its image is 16x12x5"
