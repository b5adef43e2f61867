"""Per-sample metadata from headers: DICOM tags (pixels never read) and whole-slide properties."""
from __future__ import annotations

import pydicom
from support.build_manifests import make_manifest, write_aperio_slide, write_dicom

from mmbu.build.layouts import read_samples
from mmbu.build.layouts.files import header_metadata, image_size


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
    assert samples[0].part == "frame=3"
    assert samples[0].image_size == (30, 20)


def test_a_generic_tiled_tiff_names_no_scanner(tmp_path):
    import numpy as np
    import tifffile

    path = tmp_path / "tiled.tif"
    tifffile.imwrite(path, np.zeros((512, 512, 3), np.uint8), tile=(256, 256), photometric="rgb")
    assert "slide.vendor" not in header_metadata(path)
    assert image_size(path) == (512, 512)


def test_file_facts_answer_as_the_path_checks_they_replace(tmp_path):
    import os

    from mmbu.build.layouts.files import FileFacts, is_dicom

    dicom = write_dicom(tmp_path / "IM0001", Modality="CT")
    png = tmp_path / "a.png"
    png.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(200))
    os.mkfifo(tmp_path / "pipe.png")
    (tmp_path / "dangling").symlink_to(tmp_path / "gone")
    (tmp_path / "linked.dcm").symlink_to(dicom)
    for path in (dicom, png, tmp_path / "pipe.png", tmp_path, tmp_path / "gone", tmp_path / "dangling",
                 tmp_path / "linked.dcm", png / "below-a-file"):
        facts = FileFacts.of(path)
        assert (facts.is_file, facts.is_dir, facts.dicom) == (path.is_file(), path.is_dir(), is_dicom(path)), path
    assert FileFacts.of(tmp_path / "linked.dcm").dicom and not FileFacts.of(tmp_path / "pipe.png").dicom
