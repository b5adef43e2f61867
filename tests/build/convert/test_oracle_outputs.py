"""The sources themselves as the oracle: converting never changes or replaces an input file.

Converting a folder into itself (`mmbu convert data/ --out data/`), or a file that sits in the output
folder, used to plan `<stem>.png` over the source: a DICOM named `x.png` or a 16-bit PNG was
silently replaced by its 8-bit rendering.
"""
from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from mmbu.build.convert.batch import convert_paths
from mmbu.build.convert.writer import plan_output_names

DICOM_INPUT = Path(__file__).parent / "golden" / "dicom" / "inputs" / "ct_file_window.dcm"


def _digests(folder: Path) -> dict[str, str]:
    return {path.name: hashlib.sha256(path.read_bytes()).hexdigest() for path in folder.iterdir()}


def _sources(folder: Path) -> None:
    Image.fromarray(np.arange(64 * 48, dtype=np.uint16).reshape(48, 64) * 13).save(folder / "scan16.png")
    shutil.copyfile(DICOM_INPUT, folder / "ct.png")  # a DICOM under a PNG name
    shutil.copyfile(DICOM_INPUT, folder / "ct.dcm")


@pytest.mark.parametrize("jobs", [1, 2])
def test_converting_a_folder_into_itself_keeps_every_source(tmp_path, jobs):
    _sources(tmp_path)
    before = _digests(tmp_path)
    records = convert_paths([tmp_path], tmp_path, jobs=jobs)
    after = _digests(tmp_path)
    assert {name: after[name] for name in before} == before
    assert all(record["status"] == "ok" for record in records)
    outputs = {Path(record["source"]).name: Path(record["output"]).name for record in records}
    assert set(outputs.values()).isdisjoint(before)
    assert len(set(outputs.values())) == len(records)
    with Image.open(tmp_path / outputs["ct.png"]) as image:
        assert image.mode == "L" and image.size == (64, 48)


def test_a_single_file_in_the_output_folder_is_not_overwritten(tmp_path):
    _sources(tmp_path)
    before = _digests(tmp_path)
    (record,) = convert_paths([tmp_path / "scan16.png"], tmp_path)
    assert record["status"] == "ok" and Path(record["output"]).name == "scan16-2.png"
    assert _digests(tmp_path)["scan16.png"] == before["scan16.png"]


def test_reserved_names_are_skipped_case_insensitively():
    names = plan_output_names([Path("a/X.dcm"), Path("b/x.dcm"), Path("c/y.nii.gz")], reserved={"x.PNG", "y-2.png"})
    assert names == ["X-2.png", "x-3.png", "y.png"]
