"""A format is one entry of `base.SOURCE_FORMATS`: the layouts learn its file names, kind, volume functions and view
keys from there, so a new format needs no edit in the layouts."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mmbu.build.convert import base
from mmbu.build.layouts import files, views
from mmbu.curation.manifest.model import ConvertSpec


def shape_of_fake(path: Path) -> tuple[int, int, int]:
    return (7, 5, 3)


def labels_of_fake(path: Path) -> np.ndarray:
    return np.ones((7, 5, 3), np.uint8)


@pytest.fixture
def fake_volume(monkeypatch):
    """A volume format the toolkit does not have (synthetic), named `.vol3`, its functions in this test module."""
    monkeypatch.setitem(base.SOURCE_FORMATS, "vol3", base.SourceFormat(
        f"{__name__}:shape_of_fake", (".vol3",), "volume", f"{__name__}:shape_of_fake", f"{__name__}:labels_of_fake",
        "section"))


def test_a_new_volume_format_is_known_to_the_layouts_from_its_entry(fake_volume, tmp_path):
    path = tmp_path / "brain.VOL3"
    assert files.is_volume(path) and files.volume_format(path) == "vol3"
    assert files.volume_shape(path) == (7, 5, 3) and files.read_volume_labels(path).shape == (7, 5, 3)
    assert [v.key for v in views.views_for(path, ConvertSpec(slice="middle", z=2))] == ["z=2"]
    assert not files.is_volume(tmp_path / "brain.vol")


def test_the_formats_the_layouts_know_by_name():
    assert base.formats_named(Path("a/b.nii.gz")) == ["nifti"] and base.formats_named(Path("x.MHA")) == ["metaimage"]
    assert base.formats_named(Path("s.svs")) == ["wsi"] and base.formats_named(Path("c.czi")) == ["czi"]
    assert base.formats_named(Path("m.rec"), frozenset({"volume"})) == ["mrc"]
    assert base.formats_named(Path("p.png")) == [] and base.formats_named(Path("d.dcm")) == []  # known by content
    assert [v.key for v in views.views_for(Path("v.nrrd"), ConvertSpec(slice="middle", axis=2))] == [
        "slice=middle;axis=2"]
    assert tuple(base.SOURCE_FORMATS) == base.FORMATS and set(base.READERS) == set(base.FORMATS)
