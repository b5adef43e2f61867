"""A DICOM whole-slide image is a folder of instances (one per pyramid level, plus label/overview):
the walk converts each series once, through openslide, and skips the other instances."""
import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from pydicom import Dataset
from pydicom.dataset import FileMetaDataset
from pydicom.uid import UID, ExplicitVRLittleEndian, generate_uid

sys.path.insert(0, str(Path(__file__).parent))
import factories_dicom as fd  # noqa: E402

from mmbu.build.convert.base import ConversionError  # noqa: E402
from mmbu.build.convert.batch import convert_paths, walk_sources  # noqa: E402
from mmbu.build.convert.sniff import dicom_slides_in_directory, identify  # noqa: E402

VL_WHOLE_SLIDE = UID("1.2.840.10008.5.1.4.1.1.77.1.6")
TILE = 32


def slide_scene(width: int = 96, height: int = 64) -> np.ndarray:
    """Three flat quadrants and a white one: any misplaced tile or level shows in the pixels."""
    scene = np.full((height, width, 3), 255, np.uint8)
    scene[: height // 2, : width // 2] = (200, 30, 30)
    scene[: height // 2, width // 2 :] = (30, 200, 30)
    scene[height // 2 :, width // 2 :] = (30, 30, 200)
    return scene


def write_slide_instance(path: Path, image: np.ndarray, series_uid: str, study_uid: str,
                         image_type: str = "VOLUME") -> Path:
    """One instance of a VL Whole Slide Microscopy series as pydicom writes it: uncompressed RGB
    frames of TILE² in TILED_FULL order (row by row), the level's size in TotalPixelMatrix*."""
    height, width = image.shape[:2]
    across, down = -(-width // TILE), -(-height // TILE)
    padded = np.zeros((down * TILE, across * TILE, 3), np.uint8)
    padded[:height, :width] = image
    frames = padded.reshape(down, TILE, across, TILE, 3).transpose(0, 2, 1, 3, 4)
    ds = Dataset()
    ds.file_meta = FileMetaDataset()
    ds.file_meta.MediaStorageSOPClassUID = ds.SOPClassUID = VL_WHOLE_SLIDE
    ds.file_meta.MediaStorageSOPInstanceUID = ds.SOPInstanceUID = generate_uid()
    ds.file_meta.TransferSyntaxUID = ExplicitVRLittleEndian
    ds.StudyInstanceUID, ds.SeriesInstanceUID = study_uid, series_uid
    ds.Modality = "SM"
    ds.ImageType = ["ORIGINAL" if image_type == "VOLUME" else "DERIVED", "PRIMARY", image_type, "NONE"]
    ds.DimensionOrganizationType = "TILED_FULL"
    ds.TotalPixelMatrixColumns, ds.TotalPixelMatrixRows = width, height
    ds.TotalPixelMatrixFocalPlanes = ds.NumberOfOpticalPaths = 1
    ds.Rows = ds.Columns = TILE
    ds.NumberOfFrames = across * down
    ds.SamplesPerPixel, ds.PhotometricInterpretation, ds.PlanarConfiguration = 3, "RGB", 0
    ds.BitsAllocated, ds.BitsStored, ds.HighBit, ds.PixelRepresentation = 8, 8, 7, 0
    ds.PixelData = np.ascontiguousarray(frames).tobytes()
    ds.save_as(path, enforce_file_format=True)
    return path


def write_slide_series(folder: Path, scene: np.ndarray, prefix: str = "") -> list[Path]:
    """A two-level pyramid (full and half size) plus a label, each its own instance, one series.
    The half-size level sorts first by name, so the walk has to pick the base level on purpose."""
    folder.mkdir(parents=True, exist_ok=True)
    series, study = generate_uid(), generate_uid()
    return [
        write_slide_instance(folder / f"{prefix}a-level1.dcm", scene[::2, ::2], series, study),
        write_slide_instance(folder / f"{prefix}b-level0.dcm", scene, series, study),
        write_slide_instance(folder / f"{prefix}c-label.dcm", np.full((TILE, TILE, 3), 90, np.uint8), series, study,
                             image_type="LABEL"),
    ]


def read_report(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_folder_of_one_series_is_one_source_named_after_the_folder(tmp_path):
    scene = slide_scene()
    instances = write_slide_series(tmp_path / "slide-17", scene)
    assert walk_sources([tmp_path / "slide-17"]) == [tmp_path / "slide-17"]
    identified = identify(tmp_path / "slide-17")
    assert identified.format == "wsi" and identified.path == instances[1]  # the base level

    records = convert_paths([tmp_path / "slide-17"], tmp_path / "out")
    assert [r["status"] for r in records] == ["ok"]
    assert sorted(p.name for p in (tmp_path / "out").glob("*.png")) == ["slide-17.png"]
    assert records[0]["params"]["vendor"] == "dicom"
    assert records[0]["params"]["level_count"] == 2
    np.testing.assert_array_equal(np.asarray(Image.open(tmp_path / "out" / "slide-17.png")), scene)


def test_walking_a_tree_gives_one_output_per_series(tmp_path):
    tree = tmp_path / "scans"
    first, second = slide_scene(), slide_scene()[::-1].copy()
    write_slide_series(tree / "case-1", first)
    write_slide_series(tree / "mixed", first, prefix="s1-")
    write_slide_series(tree / "mixed", second, prefix="s2-")
    fd.write_ct(tree / "mixed" / "ct.dcm", fd.ct_ramp(16, 16), window=(40, 400))  # not a slide: its own source

    sources = walk_sources([tree])
    assert sources == [tree / "case-1", tree / "mixed" / "ct.dcm", tree / "mixed" / "s1-b-level0.dcm",
                       tree / "mixed" / "s2-b-level0.dcm"]
    records = convert_paths([tree], tmp_path / "out")
    assert all(r["status"] == "ok" for r in records), records
    assert [r["format"] for r in records] == ["wsi", "dicom", "wsi", "wsi"]
    assert sorted(p.name for p in (tmp_path / "out").glob("*.png")) == [
        "case-1.png", "ct.png", "s1-b-level0.png", "s2-b-level0.png"]
    np.testing.assert_array_equal(np.asarray(Image.open(tmp_path / "out" / "s2-b-level0.png")), second)
    assert len(read_report(tmp_path / "out" / "convert-report.jsonl")) == 4


def test_instances_are_grouped_by_series_uid(tmp_path):
    write_slide_series(tmp_path, slide_scene(), prefix="x-")
    write_slide_series(tmp_path, slide_scene(), prefix="y-")
    shutil.copy(Path(__file__).parent / "fixtures" / "boxes_0.dcm", tmp_path / "z.dcm")  # openslide's one-file slide
    (tmp_path / "notes.txt").write_text("scanner log")
    slides = dicom_slides_in_directory(tmp_path)
    assert [slide.representative.name for slide in slides] == ["x-b-level0.dcm", "y-b-level0.dcm", "z.dcm"]
    assert [len(slide.instances) for slide in slides] == [3, 3, 1]
    assert len({slide.series_uid for slide in slides}) == 3


def test_a_folder_without_a_slide_is_refused_in_one_sentence(tmp_path):
    fd.write_ct(tmp_path / "ct.dcm", fd.ct_ramp(8, 8))
    with pytest.raises(ConversionError, match=r"directory without a multi-file slide .*DICOM whole-slide series"):
        identify(tmp_path)
