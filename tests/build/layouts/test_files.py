"""Per-sample metadata from headers: DICOM tags (pixels never read) and whole-slide properties."""
from __future__ import annotations

import numpy as np
import pydicom
import tifffile
from pydicom.dataset import Dataset, FileMetaDataset
from pydicom.uid import ExplicitVRLittleEndian, generate_uid
from support.build_manifests import make_manifest

from mmbu.build.layouts import read_samples
from mmbu.build.layouts.files import header_metadata, image_size


def write_dicom(path, rows=20, columns=30, **tags):
    meta = FileMetaDataset()
    meta.MediaStorageSOPClassUID = "1.2.840.10008.5.1.4.1.1.2"
    meta.MediaStorageSOPInstanceUID = generate_uid()
    meta.TransferSyntaxUID = ExplicitVRLittleEndian
    ds = Dataset()
    ds.file_meta = meta
    ds.SOPClassUID = meta.MediaStorageSOPClassUID
    ds.SOPInstanceUID = meta.MediaStorageSOPInstanceUID
    ds.Rows, ds.Columns = rows, columns
    ds.BitsAllocated, ds.BitsStored, ds.HighBit, ds.PixelRepresentation = 16, 12, 11, 0
    ds.SamplesPerPixel, ds.PhotometricInterpretation = 1, "MONOCHROME2"
    ds.PixelData = np.arange(rows * columns, dtype=np.uint16).tobytes()
    for key, value in tags.items():
        setattr(ds, key, value)
    path.parent.mkdir(parents=True, exist_ok=True)
    ds.save_as(path, enforce_file_format=True)
    return path


def write_aperio_slide(path):
    """A tiled TIFF whose description makes openslide read it as an Aperio slide."""
    pixels = np.full((512, 640, 3), 200, np.uint8)
    description = ("Aperio Image Library v12.0.0\n640x512 [0,0 640x512] (256x256) RAW/RGB"
                   "|AppMag = 20|MPP = 0.4990")
    path.parent.mkdir(parents=True, exist_ok=True)
    tifffile.imwrite(path, pixels, tile=(256, 256), photometric="rgb", description=description, metadata=None)
    return path


def test_dicom_tags_and_size_come_from_the_header(tmp_path):
    path = write_dicom(tmp_path / "ct" / "IM0001", Modality="CT", BodyPartExamined="CHEST",
                       InstitutionName="General Hospital")
    assert pydicom.dcmread(path).Modality == "CT"
    assert header_metadata(path) == {"dicom.Modality": "CT", "dicom.BodyPartExamined": "CHEST",
                                     "dicom.InstitutionName": "General Hospital"}
    assert image_size(path) == (30, 20)


def test_slide_properties_come_from_openslide(tmp_path):
    path = write_aperio_slide(tmp_path / "slide.svs")
    found = header_metadata(path)
    assert found["slide.vendor"] == "aperio"
    assert found["slide.objective_power"] == "20"
    assert float(found["slide.mpp_x"]) == 0.499
    assert image_size(path) == (640, 512)


def test_samples_carry_header_metadata_and_a_frame_policy(tmp_path):
    raw = tmp_path / "raw"
    write_dicom(raw / "MON" / "1.dcm", Modality="CT", InstitutionName="General Hospital")
    manifest = make_manifest({"kind": "folder_per_class"}, convert={"frame": 3})
    samples, exclusions = read_samples(manifest, raw)
    assert exclusions == []
    assert samples[0].file_metadata["dicom.InstitutionName"] == "General Hospital"
    assert samples[0].frame == "frame=3"
    assert samples[0].image_size == (30, 20)
