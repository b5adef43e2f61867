"""The bundled offline mirror: real files, as provenance says, laid out as the demo manifests expect.

These tests read every mirror file with the field's own reader and check the facts the labels and the
provenance rest on (header fields, sizes, instance counts), so an edit that breaks the honesty of the
demo data fails here.
"""
from __future__ import annotations

import hashlib
import re
from pathlib import Path

import nibabel
import numpy as np
import openslide
import pydicom
import tifffile
from PIL import Image
from pydicom.overlays import get_overlay_array
from scipy import ndimage

from mmbu.curation.manifest import find_manifest_files, load_manifest
from mmbu.curation.manifest.validate import layout_tasks

ROOT = Path(__file__).resolve().parents[3]
MIRROR = ROOT / "manifests" / "mirror"
DATASETS = ROOT / "manifests" / "demo"
MAX_MIRROR_BYTES = 20 * 1024 * 1024


def mirror_files() -> list[Path]:
    return sorted(p for p in MIRROR.rglob("*") if p.is_file() and p.name != "PROVENANCE.md")


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def demo_manifests():
    return [load_manifest(p) for p in find_manifest_files([DATASETS]) if (MIRROR / p.stem).is_dir()]


def test_mirror_is_small_enough():
    assert sum(p.stat().st_size for p in mirror_files()) <= MAX_MIRROR_BYTES


def test_every_mirror_folder_has_a_manifest_and_back():
    folders = {p.name for p in MIRROR.iterdir() if p.is_dir()}
    manifests = {m.id for m in demo_manifests()}
    assert folders == manifests
    assert len(folders) >= 4


def test_provenance_lists_every_file_with_its_real_sha256():
    text = (MIRROR / "PROVENANCE.md").read_text(encoding="utf-8")
    rows = dict(re.findall(r"^\| `([^`]+)` \|.*\| `([0-9a-f]{64})` \|$", text, flags=re.M))
    assert sorted(rows) == sorted(p.relative_to(MIRROR).as_posix() for p in mirror_files())
    for relative, digest in rows.items():
        assert sha256(MIRROR / relative) == digest, relative


def test_url_sources_name_mirror_files_and_their_pins_match():
    for manifest in demo_manifests():
        if manifest.source.kind != "url":
            continue
        names = {f.name for f in manifest.source.files}
        assert names == {p.relative_to(MIRROR / manifest.id).as_posix() for p in (MIRROR / manifest.id).rglob("*") if p.is_file()}
        for entry in manifest.source.files:
            if entry.sha256:
                assert sha256(MIRROR / manifest.id / entry.name) == entry.sha256


def test_local_sources_point_at_their_mirror_folder():
    for manifest in demo_manifests():
        if manifest.source.kind == "local":
            assert (ROOT / manifest.source.path).resolve() == (MIRROR / manifest.id).resolve()


def test_demo_covers_every_task_and_the_required_kinds_of_data():
    manifests = demo_manifests()
    tasks = {task for m in manifests for task in m.tasks}
    assert tasks == {"ungrounded_classification", "box_grounded_classification", "mask_grounded_classification",
                     "object_detection"}
    assert all(set(m.tasks) <= layout_tasks(m) for m in manifests)
    modalities = {m.metadata.modality for m in manifests}
    assert {"fluorescence microscopy", "digital pathology", "magnetic resonance imaging", "optical imaging"} <= modalities
    suffixes = {p.suffix for p in mirror_files()}
    assert {".dcm", ".nii", ".svs", ".tif", ".jpg", ".png"} <= suffixes
    assert {m.source.kind for m in manifests} >= {"url", "local"}


def test_fundus_images_are_what_provenance_says():
    retina = Image.open(MIRROR / "demo_fundus_skimage/normal/retina.jpg")
    assert (retina.format, retina.mode, retina.size) == ("JPEG", "RGB", (1411, 1411))
    crop = Image.open(MIRROR / "demo_fundus_skimage/microaneurysms/microaneurysms.png")
    assert (crop.format, crop.mode, crop.size) == ("PNG", "L", (102, 102))


def test_nuclei_mask_is_an_instance_mask_of_the_image():
    image = tifffile.imread(MIRROR / "demo_dsb2018_nuclei/images/dsb2018_nuclei.tif")
    mask = tifffile.imread(MIRROR / "demo_dsb2018_nuclei/masks/dsb2018_nuclei.tif")
    assert image.shape == mask.shape == (512, 512)
    instances = np.unique(mask[mask > 0])
    assert len(instances) == 125
    # nuclei are brighter than the background they sit on
    assert image[mask > 0].mean() > 2 * image[mask == 0].mean()


def test_mri_labels_rest_on_the_files():
    dicom = pydicom.dcmread(MIRROR / "demo_mri_body_region/abdomen/examples_overlay.dcm")
    assert (dicom.Modality, dicom.BodyPartExamined, dicom.StudyDescription) == ("MR", "ABDOMEN", "abdomen^liver")
    assert dicom.pixel_array.shape == (300, 484)
    volume = nibabel.load(MIRROR / "demo_mri_body_region/brain/anatomical.nii")
    assert volume.shape == (33, 41, 25)
    assert volume.header["descrip"].item().startswith(b"spm - 3D normalized")


def test_whole_slide_image_opens_as_an_aperio_slide():
    with openslide.OpenSlide(MIRROR / "demo_cmu1_wsi/hematoxylin_and_eosin/CMU-1-Small-Region.svs") as slide:
        assert slide.properties[openslide.PROPERTY_NAME_VENDOR] == "aperio"
        assert slide.dimensions == (2220, 2967)
        assert slide.properties["aperio.AppMag"] == "20"
        region = np.asarray(slide.read_region((1000, 1500), 0, (64, 64)).convert("RGB"))
        assert region.std() > 5  # tissue, not blank background


def derive_overlay_mask(dicom: pydicom.Dataset) -> np.ndarray:
    """The documented derivation of demo_mri_liver_overlay's mask: the largest filled region of overlay 6000."""
    overlay = get_overlay_array(dicom, 0x6000).astype(bool)
    regions, count = ndimage.label(ndimage.binary_fill_holes(overlay))
    sizes = ndimage.sum_labels(np.ones_like(regions), regions, index=range(1, count + 1))
    return (regions == 1 + int(np.argmax(sizes))).astype(np.uint8)


def test_liver_mask_is_the_filled_hand_drawn_contour():
    dicom = pydicom.dcmread(MIRROR / "demo_mri_liver_overlay/images/examples_overlay.dcm")
    assert dicom.SeriesDescription.startswith("marked lesion")
    assert dicom[0x6000, 0x0022].value == "Siemens MedCom Object Graphics"
    committed = np.asarray(Image.open(MIRROR / "demo_mri_liver_overlay/masks/examples_overlay.png"))
    assert committed.shape == dicom.pixel_array.shape
    np.testing.assert_array_equal(committed, derive_overlay_mask(dicom))
    rows, columns = np.nonzero(committed)
    assert committed.sum() == 920
    assert (rows.min(), rows.max(), columns.min(), columns.max()) == (139, 173, 46, 80)
    # the outlined lesion is brighter than the liver around it
    ring = ndimage.binary_dilation(committed, iterations=8) & ~ndimage.binary_dilation(committed, iterations=2)
    assert dicom.pixel_array[committed > 0].mean() > dicom.pixel_array[ring].mean()
