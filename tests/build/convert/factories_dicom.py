"""DICOM test files written by pydicom itself (and Pillow for JPEG baseline frames).

Each factory writes one small file with known stored values so tests can assert exact grey levels.
"""
from __future__ import annotations

import io
from pathlib import Path

import numpy as np
from PIL import Image
from pydicom import Dataset, dcmwrite
from pydicom.dataset import FileMetaDataset
from pydicom.encaps import encapsulate
from pydicom.pixels import convert_color_space
from pydicom.sequence import Sequence
from pydicom.uid import (
    CTImageStorage,
    ExplicitVRBigEndian,
    ExplicitVRLittleEndian,
    ImplicitVRLittleEndian,
    JPEGBaseline8Bit,
    SecondaryCaptureImageStorage,
    UID,
    generate_uid,
)

VL_WHOLE_SLIDE = UID("1.2.840.10008.5.1.4.1.1.77.1.6")
ENHANCED_CT = UID("1.2.840.10008.5.1.4.1.1.2.1")
ULTRASOUND_MULTIFRAME = UID("1.2.840.10008.5.1.4.1.1.3.1")
CR_IMAGE = UID("1.2.840.10008.5.1.4.1.1.1")


def base_dataset(sop_class: UID = SecondaryCaptureImageStorage, modality: str = "OT") -> Dataset:
    """A minimal image dataset with file meta; pixels are set by the caller."""
    ds = Dataset()
    ds.file_meta = FileMetaDataset()
    ds.file_meta.MediaStorageSOPClassUID = sop_class
    ds.file_meta.MediaStorageSOPInstanceUID = generate_uid()
    ds.file_meta.TransferSyntaxUID = ExplicitVRLittleEndian
    ds.SOPClassUID = sop_class
    ds.SOPInstanceUID = ds.file_meta.MediaStorageSOPInstanceUID
    ds.StudyInstanceUID = generate_uid()
    ds.SeriesInstanceUID = generate_uid()
    ds.Modality = modality
    ds.PatientName = "Test^Phantom"
    ds.PatientID = "PHANTOM"
    return ds


def save(ds: Dataset, path: Path, transfer_syntax: UID | None = None, file_meta: bool = True) -> Path:
    """Write `ds`; with `file_meta=False` no preamble, no 'DICM' and no file meta (old ACR-NEMA style)."""
    path = Path(path)
    if transfer_syntax is not None:
        ds.file_meta.TransferSyntaxUID = transfer_syntax
    if ds.file_meta.TransferSyntaxUID == ExplicitVRBigEndian and ds.get("BitsAllocated") == 16:
        # pydicom writes Pixel Data bytes as given; big endian files need them swapped by the writer
        ds.PixelData = np.frombuffer(ds.PixelData, "<u2").astype(">u2").tobytes()
    if file_meta:
        ds.save_as(path, enforce_file_format=True)
    else:
        syntax = ds.file_meta.TransferSyntaxUID
        del ds.file_meta
        ds.preamble = None
        dcmwrite(path, ds, implicit_vr=syntax.is_implicit_VR, little_endian=syntax.is_little_endian)
    return path


def store(ds: Dataset, path: Path, transfer_syntax: UID) -> Path:
    """Save uncompressed in `transfer_syntax`, or compress with pydicom's encoders first."""
    if transfer_syntax in (ExplicitVRLittleEndian, ImplicitVRLittleEndian, ExplicitVRBigEndian):
        return save(ds, path, transfer_syntax)
    ds.compress(transfer_syntax)
    return save(ds, path)


def with_attributes(ds: Dataset, attributes: dict | None) -> Dataset:
    """Set extra top-level attributes by keyword (e.g. PixelSpacing, PresentationLUTShape)."""
    for keyword, value in (attributes or {}).items():
        setattr(ds, keyword, value)
    return ds


def ct_dataset(
    stored: np.ndarray,
    slope: float = 1.0,
    intercept: float = -1024.0,
    window: tuple[float, float] | list | None = (40.0, 400.0),
    photometric: str = "MONOCHROME2",
    bits_stored: int = 12,
    signed: bool = False,
    attributes: dict | None = None,
) -> Dataset:
    """A CT-like grayscale dataset: `stored` values, rescale slope/intercept and (optionally) windows;
    `attributes` adds top-level attributes by keyword."""
    ds = base_dataset(CTImageStorage, "CT")
    dtype = np.int16 if signed else np.uint16
    ds.set_pixel_data(stored.astype(dtype), photometric, bits_stored)
    ds.RescaleSlope = slope
    ds.RescaleIntercept = intercept
    ds.RescaleType = "HU"
    if window is not None:
        centers, widths = (window[0], window[1]) if not isinstance(window, list) else zip(*window)
        ds.WindowCenter = list(centers) if isinstance(window, list) else centers
        ds.WindowWidth = list(widths) if isinstance(window, list) else widths
    return with_attributes(ds, attributes)


def write_ct(path: Path, stored: np.ndarray, transfer_syntax: UID = ExplicitVRLittleEndian, **kwargs) -> Path:
    return store(ct_dataset(stored, **kwargs), path, transfer_syntax)


def ct_ramp(rows: int = 64, columns: int = 64) -> np.ndarray:
    """Stored values 0..4095 across the columns; with intercept -1024 that is -1024..3071 HU."""
    ramp = np.linspace(0, 4095, columns).round().astype(np.uint16)
    return np.tile(ramp, (rows, 1))


def write_monochrome1(path: Path, stored: np.ndarray, window: tuple[float, float] | None = None,
                      presentation_shape: str | None = None, slope: float = 1.0, intercept: float = 0.0,
                      attributes: dict | None = None) -> Path:
    """A CR-like MONOCHROME1 image: low stored values are meant to be shown white."""
    ds = base_dataset(CR_IMAGE, "CR")
    ds.set_pixel_data(stored.astype(np.uint16), "MONOCHROME1", 12)
    ds.RescaleSlope, ds.RescaleIntercept = slope, intercept
    if window is not None:
        ds.WindowCenter, ds.WindowWidth = window
    if presentation_shape:
        ds.PresentationLUTShape = presentation_shape
    return save(with_attributes(ds, attributes), path)


def write_with_voi_lut(path: Path, stored: np.ndarray, lut: np.ndarray, first_mapped: int = 0,
                       lut_bits: int = 16, window: tuple[float, float] | None = (2048, 4096)) -> Path:
    """A MONOCHROME2 image with a VOI LUT Sequence (and a window that must lose to the LUT)."""
    ds = base_dataset(CR_IMAGE, "DX")
    ds.set_pixel_data(stored.astype(np.uint16), "MONOCHROME2", 12)
    item = Dataset()
    item.LUTDescriptor = [len(lut), first_mapped, lut_bits]
    item.LUTData = [int(v) for v in lut]
    item["LUTData"].VR = "US"
    item.LUTExplanation = "TEST LUT"
    ds.VOILUTSequence = Sequence([item])
    if window is not None:
        ds.WindowCenter, ds.WindowWidth = window
    return save(ds, path)


def write_rgb(path: Path, rgb: np.ndarray, photometric: str = "RGB", transfer_syntax: UID = ExplicitVRLittleEndian,
              attributes: dict | None = None) -> Path:
    """Colour: stored as RGB, or converted to YBR_FULL and stored as such (pydicom's colour conversion)."""
    ds = base_dataset(ULTRASOUND_MULTIFRAME if rgb.ndim == 4 else SecondaryCaptureImageStorage, "US")
    stored = rgb if photometric == "RGB" else convert_color_space(rgb, "RGB", photometric, per_frame=rgb.ndim == 4)
    ds.set_pixel_data(stored.astype(np.uint8), photometric, 8)
    return store(with_attributes(ds, attributes), path, transfer_syntax)


def write_jpeg_baseline(path: Path, rgb: np.ndarray, subsampling: str = "4:2:2", quality: int = 95) -> Path:
    """JPEG Baseline frame encoded by Pillow (YCbCr, chroma subsampled) and encapsulated by pydicom.

    The Photometric Interpretation is YBR_FULL_422 as the standard requires for subsampled baseline JPEG.
    """
    buffer = io.BytesIO()
    Image.fromarray(rgb.astype(np.uint8)).save(buffer, format="JPEG", quality=quality, subsampling=subsampling)
    ds = base_dataset(SecondaryCaptureImageStorage, "XC")
    ds.file_meta.TransferSyntaxUID = JPEGBaseline8Bit
    ds.Rows, ds.Columns = rgb.shape[:2]
    ds.SamplesPerPixel = 3
    ds.PhotometricInterpretation = "YBR_FULL_422" if subsampling != "4:4:4" else "YBR_FULL"
    ds.PlanarConfiguration = 0
    ds.BitsAllocated, ds.BitsStored, ds.HighBit, ds.PixelRepresentation = 8, 8, 7, 0
    ds.LossyImageCompression = "01"
    ds.PixelData = encapsulate([buffer.getvalue()])
    ds["PixelData"].VR = "OB"
    return save(ds, path)


def write_palette(path: Path, indices: np.ndarray, palette: np.ndarray) -> Path:
    """PALETTE COLOR: 8-bit indices with 16-bit red/green/blue LUTs built from `palette` (N, 3) in 0..255."""
    ds = base_dataset(SecondaryCaptureImageStorage, "OT")
    ds.set_pixel_data(indices.astype(np.uint8), "PALETTE COLOR", 8)
    entries = len(palette)
    for channel, name in enumerate(("Red", "Green", "Blue")):
        setattr(ds, f"{name}PaletteColorLookupTableDescriptor", [entries, 0, 16])
        lut16 = (palette[:, channel].astype(np.uint16) * 257).astype("<u2")
        setattr(ds, f"{name}PaletteColorLookupTableData", lut16.tobytes())
        ds[f"{name}PaletteColorLookupTableData"].VR = "OW"
    return save(ds, path)


def write_multiframe(path: Path, frames: np.ndarray, per_frame_windows: list[tuple[float, float]] | None = None,
                     transfer_syntax: UID = ExplicitVRLittleEndian, attributes: dict | None = None,
                     shared_spacing: tuple[float, float] | None = None,
                     per_frame_spacing: list[tuple[float, float] | None] | None = None) -> Path:
    """Grayscale multi-frame (frames, rows, cols); with `per_frame_windows`, an enhanced CT whose
    functional groups give each frame its own rescale (shared) and window (per frame), and optionally
    a Pixel Measures Sequence with the pixel spacing shared by all frames and/or for single frames."""
    ds = base_dataset(ENHANCED_CT if per_frame_windows else CTImageStorage, "CT")
    ds.set_pixel_data(frames.astype(np.uint16), "MONOCHROME2", 12)
    if per_frame_windows:
        transform = Dataset()
        transform.RescaleSlope, transform.RescaleIntercept, transform.RescaleType = 1.0, -1024.0, "HU"
        shared = Dataset()
        shared.PixelValueTransformationSequence = Sequence([transform])
        if shared_spacing is not None:
            shared.PixelMeasuresSequence = Sequence([_pixel_measures(shared_spacing)])
        ds.SharedFunctionalGroupsSequence = Sequence([shared])
        per_frame = []
        for index, (center, width) in enumerate(per_frame_windows):
            voi = Dataset()
            voi.WindowCenter, voi.WindowWidth = center, width
            group = Dataset()
            group.FrameVOILUTSequence = Sequence([voi])
            if per_frame_spacing and per_frame_spacing[index] is not None:
                group.PixelMeasuresSequence = Sequence([_pixel_measures(per_frame_spacing[index])])
            per_frame.append(group)
        ds.PerFrameFunctionalGroupsSequence = Sequence(per_frame)
    else:
        ds.RescaleSlope, ds.RescaleIntercept = 1.0, -1024.0
    return store(with_attributes(ds, attributes), path, transfer_syntax)


def _pixel_measures(spacing: tuple[float, float]) -> Dataset:
    item = Dataset()
    item.PixelSpacing = list(spacing)
    item.SliceThickness = 1.0
    return item


def write_wsi_header(path: Path) -> Path:
    """A DICOM whole-slide image instance (only the identity matters: sniffing routes it to openslide)."""
    ds = base_dataset(VL_WHOLE_SLIDE, "SM")
    ds.set_pixel_data(np.zeros((16, 16, 3), np.uint8), "RGB", 8)
    ds.ImageType = ["ORIGINAL", "PRIMARY", "VOLUME", "NONE"]
    return save(ds, path)
