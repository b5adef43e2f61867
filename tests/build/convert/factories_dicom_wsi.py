"""DICOM whole-slide series as pydicom writes them: one instance per pyramid level, label or overview,
all sharing a Series Instance UID (what openslide's DICOM driver and `mmbu convert DIR` read)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
from pydicom import Dataset
from pydicom.dataset import FileMetaDataset
from pydicom.uid import ExplicitVRLittleEndian, VLWholeSlideMicroscopyImageStorage as VL_WHOLE_SLIDE, generate_uid

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


def write_slide_pyramid(folder: Path, scene: np.ndarray, prefix: str = "", levels: int = 3,
                        associated: tuple[str, ...] = ("LABEL", "OVERVIEW"), study_uid: str | None = None,
                        series_uid: str | None = None) -> list[Path]:
    """`levels` pyramid levels, each half the previous, named from the smallest up (`pyramid-0` is the
    smallest, so the base level sorts last), plus one small instance per associated Image Type
    (`label.dcm`, `overview.dcm`), all of one series. Returns the paths, base level last."""
    folder.mkdir(parents=True, exist_ok=True)
    series, study = series_uid or generate_uid(), study_uid or generate_uid()
    written = [write_slide_instance(folder / f"{prefix}{kind.lower()}.dcm",
                                    np.full((TILE, TILE, 3), 90 + 40 * number, np.uint8), series, study, kind)
               for number, kind in enumerate(associated)]
    for level in reversed(range(levels)):
        step = 2**level
        written.append(write_slide_instance(folder / f"{prefix}pyramid-{levels - 1 - level}.dcm",
                                            scene[::step, ::step], series, study))
    return written
