"""A DICOM whole-slide image listed file by file by a layout is one sample per series.

Series are written by pydicom (`factories_dicom_wsi`): three pyramid levels plus a label and an
overview image per slide, all sharing a Series Instance UID; CT slices beside them stay one sample
per file.
"""
from __future__ import annotations

import shutil
import sys
from pathlib import Path

import numpy as np
import pydicom
import pytest
from support.build_manifests import make_manifest

sys.path.insert(0, str(Path(__file__).parents[1] / "convert"))
import factories_dicom as fd  # noqa: E402
from factories_dicom_wsi import slide_scene, write_slide_instance, write_slide_pyramid  # noqa: E402

from mmbu.build.layouts import make_sample_id, read_samples  # noqa: E402
from mmbu.build.layouts.dicom_slides import is_uniform_downsample  # noqa: E402

SLIDE_LABELS = {"dense": "densely packed tissue", "sparse": "sparsely packed tissue"}
WIDTH, HEIGHT = 128, 96


def _slide_manifest(layout: dict, **kwargs):
    return make_manifest(layout, labels=SLIDE_LABELS, **kwargs)


def _header(path: Path) -> pydicom.Dataset:
    return pydicom.dcmread(path, stop_before_pixels=True)


def _write_ct_slices(folder: Path, count: int = 2) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    return [fd.write_ct(folder / f"ct-{index}.dcm", fd.ct_ramp(16 + index, 16), window=(40, 400))
            for index in range(count)]


def _two_slides_and_a_ct(raw: Path) -> dict[str, list[Path]]:
    """dense/slide-a, sparse/slide-b (five instances each) and two CT slices under sparse/ct."""
    return {
        "a": write_slide_pyramid(raw / "dense" / "slide-a", slide_scene(WIDTH, HEIGHT)),
        "b": write_slide_pyramid(raw / "sparse" / "slide-b", slide_scene(WIDTH, HEIGHT)[::-1].copy()),
        "ct": _write_ct_slices(raw / "sparse" / "ct"),
    }


def test_folder_per_class_makes_one_sample_per_slide_and_leaves_ct_slices_alone(tmp_path):
    raw = tmp_path / "raw"
    written = _two_slides_and_a_ct(raw)
    manifest = _slide_manifest({"kind": "folder_per_class", "images": "**/*.dcm"})

    samples, exclusions = read_samples(manifest, raw)

    assert exclusions == []
    by_source = {s.source_path: s for s in samples}
    assert sorted(by_source) == ["dense/slide-a/pyramid-2.dcm", "sparse/ct/ct-0.dcm", "sparse/ct/ct-1.dcm",
                                 "sparse/slide-b/pyramid-2.dcm"]
    slide_a = by_source["dense/slide-a/pyramid-2.dcm"]  # the base level, though it sorts last by name
    assert slide_a.label == "dense" and by_source["sparse/slide-b/pyramid-2.dcm"].label == "sparse"
    assert slide_a.image_path == written["a"][-1]
    assert slide_a.image_size == (WIDTH, HEIGHT)  # the total pixel matrix, not one 32x32 tile
    assert sorted(slide_a.companion_paths) == sorted(written["a"])  # label and overview too: all five
    assert slide_a.file_metadata == {"dicom.Modality": "SM"}
    # the CT slices are samples exactly as they are in a dataset without slides
    alone, _ = read_samples(manifest, _copy_ct(written["ct"], tmp_path / "ct-only" / "sparse" / "ct").parents[2])
    assert len(alone) == 2
    assert [(s.sample_id, s.part, s.companion_paths) for s in alone] == [
        (by_source[s.source_path].sample_id, "frame=middle", ()) for s in alone]


def _copy_ct(slices: list[Path], folder: Path) -> Path:
    folder.mkdir(parents=True)
    for path in slices:
        (folder / path.name).write_bytes(path.read_bytes())
    return folder / slices[0].name


def test_the_sample_id_is_the_base_levels_whatever_is_listed_and_in_whatever_order(tmp_path):
    raw = tmp_path / "raw"
    written = write_slide_pyramid(raw / "slides" / "s1", slide_scene(WIDTH, HEIGHT))
    names = [p.name for p in written]
    expected = make_sample_id("demo_marrow", "slides/s1/pyramid-2.dcm", "frame=middle")
    for listed in (names, names[::-1], ["label.dcm"], ["pyramid-0.dcm", "overview.dcm"]):
        (raw / "labels.csv").write_text("file,class\n" + "".join(f"slides/s1/{n},dense\n" for n in listed))
        samples, exclusions = read_samples(
            _slide_manifest({"kind": "label_table", "table": "labels.csv", "image_column": "file",
                             "label_column": "class"}), raw)
        assert exclusions == []
        assert [(s.sample_id, s.label) for s in samples] == [(expected, "dense")], listed


def test_a_label_table_may_key_a_slide_by_any_instance_or_by_its_folder(tmp_path):
    raw = tmp_path / "raw"
    write_slide_pyramid(raw / "s1", slide_scene(WIDTH, HEIGHT))
    write_slide_pyramid(raw / "s2", slide_scene(WIDTH, HEIGHT))
    write_slide_pyramid(raw / "s3", slide_scene(WIDTH, HEIGHT))
    (raw / "labels.tsv").write_text("image\tclass\tinstitution\n"
                                    "s1/label.dcm\tdense\tSite A\n"  # the label image names the slide
                                    "s2\tsparse\tSite B\n"  # the series folder
                                    "s3/pyramid-0.dcm\tsparse\t\n"  # a low level
                                    "s3/overview.dcm\tsparse\tSite C\n")  # and another instance, same label
    manifest = _slide_manifest({"kind": "label_table", "table": "labels.tsv", "image_column": "image",
                                "label_column": "class", "metadata_columns": {"institution": "institution"}})

    samples, exclusions = read_samples(manifest, raw)

    assert exclusions == []
    assert [(s.source_path, s.label, s.row_metadata) for s in samples] == [
        ("s1/pyramid-2.dcm", "dense", {"institution": "Site A"}),
        ("s2/pyramid-2.dcm", "sparse", {"institution": "Site B"}),
        ("s3/pyramid-2.dcm", "sparse", {"institution": "Site C"}),
    ]


def test_a_series_split_over_two_class_folders_is_one_sentence_and_the_rest_goes_on(tmp_path):
    raw = tmp_path / "raw"
    split = write_slide_pyramid(raw / "dense", slide_scene(WIDTH, HEIGHT), prefix="x-")
    (raw / "sparse").mkdir()
    moved = split[-2].rename(raw / "sparse" / split[-2].name)  # one level filed under the other class
    write_slide_pyramid(raw / "sparse" / "ok", slide_scene(WIDTH, HEIGHT))
    _write_ct_slices(raw / "dense" / "ct", count=1)

    samples, exclusions = read_samples(_slide_manifest({"kind": "folder_per_class", "images": "**/*.dcm"}), raw)

    assert [s.source_path for s in samples] == ["dense/ct/ct-0.dcm", "sparse/ok/pyramid-2.dcm"]
    assert len(exclusions) == 1
    series_uid = str(_header(moved).SeriesInstanceUID)
    assert exclusions[0].item == "dense, sparse"
    assert exclusions[0].reason == (
        f"the instances of DICOM whole-slide series {series_uid} lie in 2 folders (dense: dense/x-label.dcm, "
        "dense/x-overview.dcm, dense/x-pyramid-0.dcm, dense/x-pyramid-2.dcm; sparse: sparse/x-pyramid-1.dcm), "
        "but a slide is read from one folder; the series is left out")


def test_listings_that_disagree_on_the_label_drop_only_their_series(tmp_path):
    raw = tmp_path / "raw"
    write_slide_pyramid(raw / "s1", slide_scene(WIDTH, HEIGHT))
    write_slide_pyramid(raw / "s2", slide_scene(WIDTH, HEIGHT))
    (raw / "labels.csv").write_text("file,class\ns1/pyramid-2.dcm,dense\ns1/label.dcm,sparse\ns2/pyramid-2.dcm,dense\n")
    samples, exclusions = read_samples(_slide_manifest(
        {"kind": "label_table", "table": "labels.csv", "image_column": "file", "label_column": "class"}), raw)
    assert [s.source_path for s in samples] == ["s2/pyramid-2.dcm"]
    assert [e.item for e in exclusions] == ["s1"]
    assert "are given different labels ('sparse': s1/label.dcm; 'dense': s1/pyramid-2.dcm)" in exclusions[0].reason
    assert "DICOM whole-slide series 1." in exclusions[0].reason


def test_instances_that_disagree_on_key_attributes_are_named(tmp_path):
    raw = tmp_path / "raw"
    scene = slide_scene(WIDTH, HEIGHT)
    written = write_slide_pyramid(raw / "dense" / "study", scene, levels=2)
    series_uid = str(_header(written[-1]).SeriesInstanceUID)
    write_slide_instance(raw / "dense" / "study" / "pyramid-0.dcm", scene[::2, ::2], series_uid, "1.2.3.999")
    squashed = write_slide_pyramid(raw / "dense" / "squashed", scene, levels=2)
    write_slide_instance(squashed[-2], scene[::2, ::4], str(_header(squashed[-1]).SeriesInstanceUID),
                         str(_header(squashed[-1]).StudyInstanceUID))
    write_slide_pyramid(raw / "sparse" / "ok", scene)

    samples, exclusions = read_samples(_slide_manifest({"kind": "folder_per_class", "images": "**/*.dcm"}), raw)

    assert [s.source_path for s in samples] == ["sparse/ok/pyramid-2.dcm"]
    reasons = {e.item: e.reason for e in exclusions}
    assert set(reasons) == {"dense/study", "dense/squashed"}
    assert "disagree on the Study Instance UID (" in reasons["dense/study"]
    assert "1.2.3.999: dense/study/pyramid-0.dcm" in reasons["dense/study"]
    assert reasons["dense/squashed"].endswith(
        "has a level dense/squashed/pyramid-0.dcm of 32x48 that is not a uniform downsample of its 128x96 base "
        "level dense/squashed/pyramid-1.dcm; the series is left out")


def test_label_overview_and_thumbnail_images_alone_are_never_samples(tmp_path):
    raw = tmp_path / "raw"
    write_slide_pyramid(raw / "dense" / "no-levels", slide_scene(WIDTH, HEIGHT), levels=0,
                        associated=("LABEL", "OVERVIEW", "THUMBNAIL"))
    samples, exclusions = read_samples(_slide_manifest({"kind": "folder_per_class", "images": "**/*.dcm"}), raw)
    assert samples == []
    assert [e.item for e in exclusions] == ["dense/no-levels"]
    assert exclusions[0].reason.endswith(
        "holds only label, overview or thumbnail images (dense/no-levels/label.dcm, dense/no-levels/overview.dcm, "
        "dense/no-levels/thumbnail.dcm), no pyramid level to convert")


def test_a_one_file_slide_keeps_the_id_it_had_as_a_file(tmp_path):
    raw = tmp_path / "raw"
    (raw / "dense").mkdir(parents=True)
    shutil.copy(Path(__file__).parents[1] / "convert" / "fixtures" / "boxes_0.dcm", raw / "dense" / "one.dcm")
    samples, exclusions = read_samples(_slide_manifest({"kind": "folder_per_class"}), raw)
    assert exclusions == []
    assert [(s.sample_id, s.image_size, s.companion_paths) for s in samples] == [
        (make_sample_id("demo_marrow", "dense/one.dcm", "frame=middle"), (16, 16), (raw / "dense" / "one.dcm",))]


def test_yolo_boxes_on_the_base_level_ground_the_slide_and_lower_levels_need_no_label_file(tmp_path):
    raw = tmp_path / "raw"
    write_slide_pyramid(raw / "images", slide_scene(WIDTH, HEIGHT))
    (raw / "labels").mkdir()
    (raw / "labels" / "pyramid-2.txt").write_text("0 0.5 0.5 0.25 0.5\n")
    manifest = _slide_manifest({"kind": "yolo", "images": "images/*.dcm", "labels": "labels",
                                "class_names": ["dense"]}, tasks=["object_detection"])

    samples, exclusions = read_samples(manifest, raw)

    assert exclusions == []
    assert [(s.source_path, [r.box for r in s.regions]) for s in samples] == [
        ("images/pyramid-2.dcm", [(48.0, 24.0, 80.0, 72.0)])]  # normalised on the 128x96 base level


def test_a_mask_on_the_base_level_grounds_the_slide_and_other_instances_need_none(tmp_path):
    from PIL import Image

    raw = tmp_path / "raw"
    write_slide_pyramid(raw / "slides", slide_scene(WIDTH, HEIGHT))
    mask = np.zeros((HEIGHT, WIDTH), np.uint8)
    mask[10:30, 20:60] = 1
    (raw / "masks").mkdir()
    Image.fromarray(mask).save(raw / "masks" / "pyramid-2.png")
    manifest = _slide_manifest({"kind": "image_mask_pairs", "images": "slides/*.dcm", "masks": "masks/*.png",
                                "mask_values": {1: "dense"}}, tasks=["box_grounded_classification"])

    samples, exclusions = read_samples(manifest, raw)

    assert exclusions == []
    assert [(s.source_path, s.mask_path, [r.box for r in s.regions]) for s in samples] == [
        ("slides/pyramid-2.dcm", raw / "masks" / "pyramid-2.png", [(20, 10, 60, 30)])]


@pytest.mark.parametrize(("base", "level", "uniform"), [
    ((128, 96), (64, 48), True), ((97, 65), (48, 32), True), ((100, 70), (33, 23), True),
    ((128, 96), (64, 24), False), ((128, 96), (32, 48), False), ((4096, 4096), (1, 1), True),
])
def test_a_level_is_a_uniform_downsample_within_rounding(base, level, uniform):
    assert is_uniform_downsample(base, level) is uniform
