"""Radiology volumes beyond what the replica specs (tests/catalogue/replicas/) check: the converter's choices on
a replica of the cited tree, i.e. which volume of a 4-D file is shown and which slice the mask picks, and the
boxes read from that slice.

- Medical Segmentation Decathlon Task05_Prostate: `Task05_Prostate/imagesTr/prostate_00.nii.gz` and
  `labelsTr/prostate_00.nii.gz` (openmedlab/Awesome-Medical-Dataset@81da0ee resources/MSD_Prostate.md),
  4-D images with volume 0 = T2 and 1 = ADC, labels PZ 1 and TZ 2 (the task's dataset.json as quoted in
  MIC-DKFZ/nnUNet@b54d750 documentation/dataset_conversion.md).
- KiTS19: `case_00000/imaging.nii.gz` and `segmentation.nii.gz`, 0 background, 1 kidney, 2 tumor, slices on
  the first axis with the affine of the README (neheller/kits19@456b293 README.md); the manifest renames
  the downloads to `imaging/case_00000.nii.gz` and `segmentation/case_00000.nii.gz` so that stems pair.
"""
from __future__ import annotations

from pathlib import Path

import nibabel
import numpy as np
import pytest

from mmbu.build.convert.dispatch import read_image
from mmbu.build.layouts import read_samples, with_converted_mask
from mmbu.build.steps import convert_options
from mmbu.curation.manifest import load_manifest

DATASETS = Path(__file__).resolve().parents[2] / "manifests" / "datasets"


def _save(path: Path, array: np.ndarray, affine: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    nibabel.save(nibabel.Nifti1Image(array, affine), path)


def _boxes(manifest, sample, mask_path: Path) -> dict[str, tuple[int, int, int, int]]:
    converted = read_image(mask_path, convert_options(manifest, as_mask=True, slice_mask=mask_path))
    placed, exclusions = with_converted_mask(sample, converted.pixels, manifest)
    assert exclusions == []
    return {region.label: tuple(region.box) for region in placed.regions}


def test_msd_prostate_replica_pairs_volumes_and_shows_the_t2_volume(tmp_path: Path) -> None:
    manifest = load_manifest(DATASETS / "msd_task05_prostate.yaml")
    task = tmp_path / "Task05_Prostate"
    image = np.zeros((32, 24, 6, 2), dtype=np.float32)
    image[..., 0] = 100.0                     # T2: uniform 100 with a bright square
    image[10:20, 8:16, :, 0] = 400.0
    image[..., 1] = 900.0                     # ADC: uniformly bright, must not be the volume shown
    mask = np.zeros((32, 24, 6), dtype=np.uint8)
    mask[4:9, 3:7, 2] = 1                     # peripheral zone, largest on slice 2
    mask[12:18, 10:20, 2] = 2                 # transition zone
    mask[12:14, 10:12, 4] = 2                 # a smaller slice the converter must not pick
    _save(task / "imagesTr" / "prostate_00.nii.gz", image, np.eye(4))
    _save(task / "labelsTr" / "prostate_00.nii.gz", mask, np.eye(4))

    samples, exclusions = read_samples(manifest, tmp_path)

    assert exclusions == []
    assert [s.source_path for s in samples] == ["Task05_Prostate/imagesTr/prostate_00.nii.gz"]
    assert sorted(r.label for r in samples[0].regions) == ["PZ", "TZ"]
    boxes = _boxes(manifest, samples[0], task / "labelsTr" / "prostate_00.nii.gz")
    assert set(boxes) == {"PZ", "TZ"}
    (x1, y1, x2, y2), (u1, v1, u2, v2) = boxes["PZ"], boxes["TZ"]
    assert (x2 - x1) * (y2 - y1) == 5 * 4 and (u2 - u1) * (v2 - v1) == 6 * 10  # slice 2, whole regions
    shown = read_image(task / "imagesTr" / "prostate_00.nii.gz",
                       convert_options(manifest, slice_mask=task / "labelsTr" / "prostate_00.nii.gz")).pixels
    assert shown.max() > shown.min()           # the T2 volume (square on a background), not the uniform ADC one


def test_kits19_replica_pairs_renamed_downloads(tmp_path: Path) -> None:
    manifest = load_manifest(DATASETS / "kits19.yaml")
    names = {f.name for f in manifest.source.files}
    assert {"imaging/case_00000.nii.gz", "segmentation/case_00000.nii.gz"} <= names
    affine = np.array([[0.0, 0.0, -0.78162497, 0.0], [0.0, -0.78162497, 0.0, 0.0],
                       [-3.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0]])   # README: slices on the first axis
    volume = np.full((5, 40, 30), -100.0, dtype=np.float32)
    segmentation = np.zeros((5, 40, 30), dtype=np.uint8)
    segmentation[3, 5:25, 4:14] = 1           # kidney
    segmentation[3, 10:15, 20:26] = 2         # tumour
    _save(tmp_path / "imaging" / "case_00000.nii.gz", volume, affine)
    _save(tmp_path / "segmentation" / "case_00000.nii.gz", segmentation, affine)
    _save(tmp_path / "imaging" / "case_00001.nii.gz", volume, affine)   # no segmentation: excluded, not fatal

    samples, exclusions = read_samples(manifest, tmp_path)

    assert [s.source_path for s in samples] == ["imaging/case_00000.nii.gz"]
    assert [e.item for e in exclusions] == ["imaging/case_00001.nii.gz"]
    boxes = _boxes(manifest, samples[0], tmp_path / "segmentation" / "case_00000.nii.gz")
    sizes = {label: sorted(((x2 - x1), (y2 - y1))) for label, (x1, y1, x2, y2) in boxes.items()}
    assert sizes == {"kidney": [10, 20], "tumor": [5, 6]}  # the labelled slice, each region whole


@pytest.mark.parametrize("manifest_id", ["msd_task01_brain_tumour", "msd_task02_heart", "msd_task03_liver",
                                         "msd_task04_hippocampus", "msd_task06_lung", "msd_task07_pancreas",
                                         "msd_task08_hepatic_vessel", "msd_task09_spleen", "msd_task10_colon"])
def test_other_decathlon_tasks_share_the_replicated_shape(manifest_id: str) -> None:
    manifest = load_manifest(DATASETS / f"{manifest_id}.yaml")
    folder = manifest.source.files[0].url.rsplit("/", 1)[1].removesuffix(".tar")
    assert (manifest.layout.images, manifest.layout.masks) == (f"{folder}/imagesTr/[!.]*.nii.gz",
                                                               f"{folder}/labelsTr/[!.]*.nii.gz")
