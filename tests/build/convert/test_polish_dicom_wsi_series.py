"""A DICOM whole-slide image is a folder of instances (one per pyramid level, plus label/overview):
the walk converts each series once, through openslide, and skips the other instances."""
import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

sys.path.insert(0, str(Path(__file__).parent))
import factories_dicom as fd  # noqa: E402
from factories_dicom_wsi import slide_scene, write_slide_series  # noqa: E402

from mmbu.build.convert.base import ConversionError  # noqa: E402
from mmbu.build.convert.batch import convert_paths, walk_sources  # noqa: E402
from mmbu.build.convert.sniff import dicom_slides_in_directory, identify  # noqa: E402


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
