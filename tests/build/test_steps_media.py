"""Manifests that name videos, vendor microscopy and MetaImage/NRRD volumes: the layouts list one sample
per chosen frame or series with stable ids, and the build's convert step hands each its own options."""
from __future__ import annotations

import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from support.build_manifests import make_manifest

sys.path.insert(0, str(Path(__file__).parent / "convert"))
from factories_itk import write as write_itk  # noqa: E402
from factories_video import write_video  # noqa: E402

from mmbu.build.convert.base import ConvertOptions  # noqa: E402
from mmbu.build.convert.dispatch import read_image  # noqa: E402
from mmbu.build.layouts import read_samples  # noqa: E402
from mmbu.build.steps import convert_samples  # noqa: E402
from mmbu.curation.manifest.model import ConvertSpec  # noqa: E402

LIF = Path(__file__).parent / "convert" / "fixtures" / "microscopy" / "testdata_2channel_xz.lif"
FOLDERS = {"kind": "folder_per_class"}


def _videos(raw: Path) -> None:
    write_video((raw / "MON").mkdir(parents=True) or raw / "MON" / "a.mp4", frames=60)
    write_video((raw / "LYT").mkdir(parents=True) or raw / "LYT" / "b.avi", frames=60, codec="mjpeg")


def test_an_index_list_gives_one_sample_per_frame_with_stable_ids(tmp_path):
    raw = tmp_path / "raw"
    _videos(raw)
    manifest = make_manifest(FOLDERS, convert={"video": {"frames": [0, 30, 59]}})
    samples, exclusions = read_samples(manifest, raw)
    assert not exclusions and len(samples) == 6
    assert [s.view for s in samples[:3]] == [{"frame": 0}, {"frame": 30}, {"frame": 59}]
    assert len({s.sample_id for s in samples}) == 6
    again, _ = read_samples(manifest, raw)
    assert [s.sample_id for s in again] == [s.sample_id for s in samples]  # same on every rebuild
    converted, conversions, dropped = convert_samples(samples, manifest, tmp_path / "work", "test")
    assert not dropped and len(conversions) == 6
    for sample in samples:
        png = np.asarray(Image.open(conversions[sample.sample_id].png))
        direct = read_image(sample.image_path, ConvertOptions(frame=sample.view["frame"])).pixels
        np.testing.assert_array_equal(png, direct)
        assert conversions[sample.sample_id].record["params"]["frame_index"] == sample.view["frame"]


def test_every_n_seconds_lists_frames_up_to_the_end(tmp_path):
    raw = tmp_path / "raw"
    _videos(raw)  # 60 frames at 25 fps: 2.4 s
    manifest = make_manifest(FOLDERS, convert={"video": {"every_seconds": 1.0}})
    samples, _ = read_samples(manifest, raw)
    assert [s.view for s in samples if s.label == "MON"] == [{"frame_time": 0.0}, {"frame_time": 1.0},
                                                               {"frame_time": 2.0}]
    capped = make_manifest(FOLDERS, convert={"video": {"every_seconds": 1.0, "max_frames": 2}})
    assert len(read_samples(capped, raw)[0]) == 4


def test_a_label_table_names_the_frames_row_by_row(tmp_path):
    raw = tmp_path / "raw"
    write_video((raw / "videos").mkdir(parents=True) or raw / "videos" / "scope.mp4", frames=40)
    (raw / "labels.csv").write_text("video,frame,label\nscope.mp4,5,MON\nscope.mp4,33,LYT\nscope.mp4,x,MON\n")
    manifest = make_manifest({"kind": "label_table", "table": "labels.csv", "image_column": "video",
                              "label_column": "label", "image_root": "videos", "frame_column": "frame"})
    samples, exclusions = read_samples(manifest, raw)
    assert [(s.label, s.view) for s in samples] == [("MON", {"frame": 5}), ("LYT", {"frame": 33})]
    assert samples[0].sample_id != samples[1].sample_id
    assert [e.item for e in exclusions] == ["labels.csv:4"] and "not a 0-based frame index" in exclusions[0].reason
    _, conversions, _ = convert_samples(samples, manifest, tmp_path / "work", "test")
    assert conversions[samples[1].sample_id].record["params"]["frame_index"] == 33


def test_series_each_gives_one_sample_per_series(tmp_path):
    raw = tmp_path / "raw"
    (raw / "MON").mkdir(parents=True)
    shutil.copy(LIF, raw / "MON" / "scan.lif")
    manifest = make_manifest(FOLDERS, convert={"series": "each", "t": 0})
    samples, _ = read_samples(manifest, raw)
    assert [s.view for s in samples] == [{"series": 0}, {"series": 1}, {"series": 2}]
    _, conversions, dropped = convert_samples(samples, manifest, tmp_path / "work", "test")
    assert not dropped
    names = [conversions[s.sample_id].record["params"]["series_name"] for s in samples]
    assert len(set(names)) == 3
    picked = make_manifest(FOLDERS, convert={"series": 2})
    one, _ = read_samples(picked, raw)
    assert len(one) == 1 and one[0].view == {}


def test_an_unreadable_video_is_excluded_when_its_frames_are_listed(tmp_path):
    raw = tmp_path / "raw"
    (raw / "MON").mkdir(parents=True)
    (raw / "MON" / "broken.mp4").write_bytes(b"\x00\x00\x00\x18ftypmp42" + b"\x00" * 40)
    manifest = make_manifest(FOLDERS, convert={"video": {"every_seconds": 1.0}})
    samples, exclusions = read_samples(manifest, raw)
    assert not samples and "not a readable video" in exclusions[0].reason


def test_metaimage_image_with_nrrd_mask_goes_through_the_same_transform(tmp_path):
    raw = tmp_path / "raw"
    (raw / "images").mkdir(parents=True)
    (raw / "masks").mkdir()
    labels = np.zeros((20, 16, 6), np.uint8)
    labels[2:6, 3:5, 4] = 1
    labels[10:15, 8:12, 4] = 2
    image = np.where(labels > 0, 900, 100).astype(np.int16)
    geometry = dict(spacing=(1.0, 1.0, 3.0))
    write_itk(raw / "images" / "case.mha", image, **geometry)
    write_itk(raw / "masks" / "case_mask.nrrd", labels, **geometry)
    manifest = make_manifest({"kind": "image_mask_pairs", "images": "images/*.mha", "masks": "masks/*.nrrd",
                              "mask_suffix": "_mask", "mask_values": {1: "gland", 2: "stroma"}},
                             labels={"gland": "gland", "stroma": "stroma"}, tasks=["mask_grounded_classification"],
                             convert={"slice": "mask_max_area"})
    samples, exclusions = read_samples(manifest, raw)
    assert not exclusions and samples[0].part == "slice=mask_max_area;axis=2"
    converted, conversions, dropped = convert_samples(samples, manifest, tmp_path / "work", "test")
    assert not dropped
    conversion = conversions[converted[0].sample_id]
    png = np.asarray(Image.open(conversion.png))
    mask = np.asarray(Image.open(conversion.mask_png))
    assert png.shape == mask.shape == (16, 20)
    assert (png[mask > 0] == 255).all() and (png[mask == 0] < 255).all()  # the regions sit where the image is bright
    assert [r.label for r in converted[0].regions] == ["gland", "stroma"]


@pytest.mark.parametrize("bad", [{"video": {"frames": [1], "every_seconds": 2}}, {"video": {"frames": []}},
                                 {"series": ""}, {"z": -1}, {"video": {"frames": [3, 3]}}])
def test_convert_spec_refuses_contradictory_choices(bad):
    with pytest.raises(ValueError):
        ConvertSpec.model_validate(bad)
