"""Replicas of real radiology sources: each writes the tree and file names a manifest's evidence cites,
then runs that manifest's own layout (and, for volumes, the converter's slice choice) over it.

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


def test_hc18_replica_boxes_the_drawn_ellipse(tmp_path: Path) -> None:
    """HC18: `NNN_HC.png` beside `NNN_HC_Annotation.png`, the annotation an ellipse outline
    (dataset-ninja/fetal-head-ultrasound@d89b978 src/convert.py); test images come without one."""
    from PIL import Image, ImageDraw

    manifest = load_manifest(DATASETS / "hc18.yaml")
    folder = tmp_path / "training_set"
    folder.mkdir()
    Image.new("L", (80, 60), 40).save(folder / "000_HC.png")
    outline = Image.new("L", (80, 60), 0)
    ImageDraw.Draw(outline).ellipse((10, 8, 61, 45), outline=255, width=2)
    outline.save(folder / "000_HC_Annotation.png")
    (tmp_path / "test_set").mkdir()
    Image.new("L", (80, 60), 40).save(tmp_path / "test_set" / "001_HC.png")

    samples, exclusions = read_samples(manifest, tmp_path)

    assert [s.source_path for s in samples] == ["training_set/000_HC.png"]
    assert [e.item for e in exclusions] == ["test_set/001_HC.png"]
    [region] = samples[0].regions
    assert region.label == "fetal_head_outline"
    assert tuple(region.box) == (10, 8, 62, 46)  # PIL's ellipse box is inclusive; boxes are end-exclusive


def test_endoscapes_replica_reads_the_test_split_coco_file(tmp_path: Path) -> None:
    """Endoscapes2023: `test/162_5850.jpg` beside `test/annotation_coco.json` under the zip's `endoscapes/`
    (CAMMA-public/Endoscapes@3120e73 README.md tree); class names as the reference loader spells them
    (CAMMA-public/SurgLatentGraph@8e521f0 configs/datasets/endoscapes/endoscapes_instance.py)."""
    import json

    from PIL import Image

    manifest = load_manifest(DATASETS / "endoscapes2023.yaml")
    split = tmp_path / "endoscapes" / "test"
    split.mkdir(parents=True)
    Image.new("RGB", (854, 480), (90, 40, 30)).save(split / "162_5850.jpg")
    names = ["cystic_plate", "calot_triangle", "cystic_artery", "cystic_duct", "gallbladder", "tool"]
    (split / "annotation_coco.json").write_text(json.dumps({
        "images": [{"id": 1, "file_name": "162_5850.jpg", "width": 854, "height": 480}],
        "categories": [{"id": i + 1, "name": n} for i, n in enumerate(names)],
        "annotations": [{"id": 1, "image_id": 1, "category_id": 5, "bbox": [100, 50, 200, 150]},
                        {"id": 2, "image_id": 1, "category_id": 6, "bbox": [500, 300, 120, 90]}]}))

    samples, exclusions = read_samples(manifest, tmp_path)

    assert exclusions == []
    [sample] = samples
    assert sample.source_path == "endoscapes/test/162_5850.jpg"
    assert sorted((r.label, tuple(r.box)) for r in sample.regions) == [
        ("gallbladder", (100, 50, 300, 200)), ("tool", (500, 300, 620, 390))]


def test_ixi_replica_labels_each_volume_by_its_archive_folder(tmp_path: Path) -> None:
    """IXI: each archive `IXI-{T1,T2,PD}.tar` unpacked into a folder named after its sequence, files
    `{subject}-{sequence}.nii.gz` (fepegar/torchio src/torchio/datasets/ixi.py)."""
    manifest = load_manifest(DATASETS / "ixi.yaml")
    assert [f.name for f in manifest.source.files] == ["T1/IXI-T1.tar", "T2/IXI-T2.tar", "PD/IXI-PD.tar"]
    for sequence in ("T1", "T2", "PD"):
        _save(tmp_path / sequence / f"IXI002-Guys-0828-{sequence}.nii.gz", np.zeros((8, 8, 4), np.float32), np.eye(4))

    samples, exclusions = read_samples(manifest, tmp_path)

    assert exclusions == []
    assert sorted((s.source_path, s.label) for s in samples) == [
        ("PD/IXI002-Guys-0828-PD.nii.gz", "PD"), ("T1/IXI002-Guys-0828-T1.nii.gz", "T1"),
        ("T2/IXI002-Guys-0828-T2.nii.gz", "T2")]
