"""Vendor microscopy (CZI, LIF, ND2, VSI): series, Z/T, size budget and channel blending, checked
against each vendor reader's own arrays (and, for VSI, against a second, independent reader)."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))

from factories_czi import write_czi, write_rgb_czi  # noqa: E402

from mmbu.build.convert import microscopy  # noqa: E402
from mmbu.build.convert.base import ConversionError, ConvertOptions  # noqa: E402
from mmbu.build.convert.batch import convert_paths, walk_sources  # noqa: E402
from mmbu.build.convert.dispatch import read_image  # noqa: E402
from mmbu.build.convert.sniff import identify  # noqa: E402

FIXTURES = Path(__file__).parent / "fixtures" / "microscopy"
ND2 = FIXTURES / "cluster.nd2"
LIF = FIXTURES / "testdata_2channel_xz.lif"
VSI = FIXTURES / "vsi-ets-test-jpg2k.vsi"


def reference_blend(planes: list[np.ndarray], colours: list[tuple[int, int, int]]) -> np.ndarray:
    """The additive blend written out from its definition: each channel's 0.5-99.5 percentile window
    to 8 bits, times its colour, summed and clipped."""
    total = np.zeros(planes[0].shape + (3,))
    for plane, colour in zip(planes, colours):
        values = plane.astype(np.float64)
        lo, hi = np.percentile(values, [0.5, 99.5])
        if hi <= lo:
            lo, hi = values.min(), values.max()
        eight_bit = np.rint(np.clip((values - lo) / (hi - lo), 0, 1) * 255) / 255
        total += eight_bit[..., None] * (np.asarray(colour) / 255)
    return np.clip(np.rint(total * 255), 0, 255).astype(np.uint8)


def assert_close(actual: np.ndarray, expected: np.ndarray) -> None:
    assert actual.shape == expected.shape
    assert np.abs(actual.astype(int) - expected.astype(int)).max() <= 1  # float32 vs float64 rounding only


# --- ND2 (real file: pims_nd2's cluster.nd2, 2 channels, T=3, Z=10) --------------------------------

def test_nd2_blends_the_files_channel_colours_like_the_vendor_arrays():
    import nd2

    converted = read_image(ND2, ConvertOptions(z=4, t=2))
    with nd2.ND2File(ND2) as handle:
        stack = handle.asarray()  # (T, Z, C, Y, X)
        colours = [(c.channel.color.r, c.channel.color.g, c.channel.color.b) for c in handle.metadata.channels]
    assert_close(converted.pixels, reference_blend([stack[2, 4, 0], stack[2, 4, 1]], colours))
    params = converted.params
    assert params["plane"] == {"T": 2, "Z": 4} and params["stack"] == {"T": 3, "Z": 10}
    assert [c["colour"] for c in params["channels"]] == ["#78E90F", "#FE0100"]
    assert params["channels"][0]["name"] == "5-FAM/pH 9.0" and params["channels"][0]["colour_source"] == "nd2-channel-color"
    assert converted.format == "nd2" and params["reader"].startswith("nd2 ")


def test_nd2_defaults_to_the_middle_plane_and_refuses_an_index_outside():
    assert read_image(ND2, ConvertOptions()).params["plane"] == {"T": 1, "Z": 5}
    with pytest.raises(ConversionError, match="Z index 10 is outside 0..9"):
        read_image(ND2, ConvertOptions(z=10))


# --- LIF (real file: readlif's 2-channel XZ scans, three series) ------------------------------------

def test_lif_series_are_listed_and_picked_by_index_or_name():
    import liffile

    by_index = read_image(LIF, ConvertOptions(series=2))
    by_name = read_image(LIF, ConvertOptions(series=by_index.params["series_name"]))
    np.testing.assert_array_equal(by_index.pixels, by_name.pixels)
    assert by_index.params["series_count"] == 3
    with liffile.LifFile(LIF) as lif:
        image = lif.images[2]
        data = image.asarray()  # (C, Z, X): an XZ scan, Z running down the rows
        assert image.dims == ("C", "Z", "X")
    assert_close(by_index.pixels, reference_blend([data[0], data[1]], [(0, 255, 0), (255, 0, 0)]))
    assert [c["colour_source"] for c in by_index.params["channels"]] == ["lif-lut", "lif-lut"]  # LUTName Green, Red
    with pytest.raises(ConversionError, match="no series named 'nope'"):
        read_image(LIF, ConvertOptions(series="nope"))
    with pytest.raises(ConversionError, match="series 3 is outside 0..2"):
        read_image(LIF, ConvertOptions(series=3))


def test_lif_time_series_takes_the_chosen_time_point():
    import liffile

    converted = read_image(LIF, ConvertOptions(series=0, t=7))
    with liffile.LifFile(LIF) as lif:
        data = lif.images[0].asarray()  # (T, C, Z, X)
    assert converted.params["plane"] == {"T": 7}
    assert_close(converted.pixels, reference_blend([data[7, 0], data[7, 1]], [(0, 255, 0), (255, 0, 0)]))


def test_a_plane_over_the_budget_is_box_reduced_in_bands(monkeypatch):
    import liffile

    monkeypatch.setattr(microscopy, "PIXEL_BUDGET", 128 * 128)
    monkeypatch.setattr(microscopy, "BAND_ROWS", 40)  # several bands, one of them partial
    converted = read_image(LIF, ConvertOptions(series=2))
    with liffile.LifFile(LIF) as lif:
        data = lif.images[2].asarray().astype(np.float64)
    reduced = [data[c].reshape(128, 4, 128, 4).mean(axis=(1, 3)) for c in range(2)]
    assert converted.params["read"].startswith("box reduce by 4")
    assert converted.geometry.stored_size == (512, 512) and converted.geometry.output_size == (128, 128)
    assert_close(converted.pixels, reference_blend(reduced, [(0, 255, 0), (255, 0, 0)]))


# --- VSI (real file: zenodo 6094961 via bioio-vsi, 2 channels, Z=11, JPEG 2000 tiles) -----------------

def test_vsi_matches_an_independent_reader_and_colours_channels_by_name():
    from bioio_vsi import open_vsi

    converted = read_image(VSI, ConvertOptions(z=4))
    image = open_vsi(str(VSI))
    planes = [image.read_plane(t=0, c=c, z=4) for c in range(2)]
    assert_close(converted.pixels, reference_blend(planes, [(0, 0, 255), (0, 255, 0)]))  # C405 blue, C488 green
    assert [c["colour_source"] for c in converted.params["channels"]] == ["name:405", "name:488"]
    small = read_image(VSI, ConvertOptions(max_size=400))
    assert small.pixels.shape == (400, 391, 3) and small.geometry.stored_size == (1645, 1682)
    assert [step.kind for step in small.geometry.transforms] == ["level"]  # slideio read at the output size


def test_vsi_without_its_ets_folder_is_one_sentence(tmp_path):
    lonely = tmp_path / "lonely.vsi"
    lonely.write_bytes(VSI.read_bytes())
    assert identify(lonely).format == "vsi"
    with pytest.raises(ConversionError, match="not a readable VSI file") as error:
        read_image(lonely, ConvertOptions())
    assert "\n" not in str(error.value)


def test_walking_a_folder_skips_the_vsi_pixel_folder(tmp_path):
    names = [p.name for p in walk_sources([FIXTURES])]
    assert "frame_t_0.ets" not in names and "vsi-ets-test-jpg2k.vsi" in names


# --- CZI (written by Zeiss's own libCZI through pylibCZIrw) ------------------------------------------

def test_czi_scene_z_and_display_colours(tmp_path):
    from pylibCZIrw import czi as pyczi

    path = write_czi(tmp_path / "scan.czi")
    converted = read_image(path, ConvertOptions(series=1, z=2))
    with pyczi.open_czi(str(path)) as doc:
        rect = doc.scenes_bounding_rectangle[1]
        roi = (rect.x, rect.y, rect.w, rect.h)
        planes = [doc.read(roi=roi, plane={"C": c, "Z": 2, "T": 0}, scene=1)[..., 0] for c in range(2)]
    assert_close(converted.pixels, reference_blend(planes, [(0, 0, 255), (255, 0, 255)]))
    assert [c["name"] for c in converted.params["channels"]] == ["DAPI", "Cy5"]
    assert converted.params["series_count"] == 2 and converted.params["plane"] == {"T": 0, "Z": 2}


def test_czi_zoomed_read_fits_max_size(tmp_path):
    path = write_czi(tmp_path / "scan.czi", height=300, width=400)
    converted = read_image(path, ConvertOptions(max_size=100))
    assert converted.pixels.shape == (75, 100, 3) and converted.geometry.stored_size == (400, 300)
    assert converted.geometry.scale == (0.25, 0.25)  # boxes on the full plane map onto the PNG by this


def test_czi_brightfield_stays_rgb_in_rgb_order(tmp_path):
    path = write_rgb_czi(tmp_path / "bf.czi")  # a red square on white, stored as libCZI's BGR
    converted = read_image(path, ConvertOptions())
    assert converted.mode == "RGB"
    assert tuple(converted.pixels[5, 5]) == (255, 0, 0) and tuple(converted.pixels[20, 30]) == (255, 255, 255)


def test_corrupt_czi_subblock_is_one_error_and_the_batch_goes_on(tmp_path):
    folder = tmp_path / "in"
    good = write_czi(folder / "good.czi")
    data = bytearray(good.read_bytes())
    last = data.rfind(b"ZISRAWSUBBLOCK")
    frame = data.find(b"\x28\xb5\x2f\xfd", last)  # the zstd frame of the last plane written (scene 1, C 1, Z 2)
    data[frame:frame + 24] = b"\xff" * 24
    (folder / "corrupt.czi").write_bytes(bytes(data))
    (folder / "truncated.czi").write_bytes(good.read_bytes()[: len(data) // 2])
    out = tmp_path / "out"
    records = {Path(r["source"]).name: r for r in convert_paths([folder], out, ConvertOptions(series=1, z=2))}
    assert records["good.czi"]["status"] == "ok"
    for name, words in (("corrupt.czi", "cannot be decoded"), ("truncated.czi", "not a readable CZI file")):
        assert records[name]["status"] == "error" and words in records[name]["error"] and name in records[name]["error"]
        assert not (out / name.replace(".czi", ".png")).exists()


def test_formats_are_sniffed_from_content(tmp_path):
    for source, expected in ((ND2, "nd2"), (LIF, "lif"), (write_czi(tmp_path / "a.czi"), "czi")):
        renamed = tmp_path / f"renamed-{expected}.bin"
        renamed.write_bytes(source.read_bytes())
        assert identify(renamed).format == expected


def test_cli_picks_series_and_time_point(tmp_path):
    import json

    from click.testing import CliRunner

    from mmbu.cli import cli

    result = CliRunner().invoke(cli, ["convert", str(LIF), "--series", "xzt", "--t", "3", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    record = json.loads((tmp_path / "convert-report.jsonl").read_text())
    assert record["format"] == "lif" and record["params"]["series_name"] == "xzt"
    assert record["params"]["plane"] == {"T": 3} and (record["width"], record["height"]) == (128, 128)


def test_a_czi_label_plane_as_mask_keeps_its_labels_when_shrunk(tmp_path):
    from pylibCZIrw import czi as pyczi

    labels = np.zeros((64, 96), np.uint8)
    labels[8:40, 16:48] = 3
    labels[44:60, 60:90] = 7
    path = tmp_path / "labels.czi"
    with pyczi.create_czi(str(path), exist_ok=True) as writer:
        writer.write(labels, plane={"C": 0, "Z": 0, "T": 0})
    converted = read_image(path, ConvertOptions(as_mask=True, max_size=48))
    assert converted.pixels.shape == (32, 48) and set(np.unique(converted.pixels)) == {0, 3, 7}
    np.testing.assert_array_equal(converted.pixels, labels[1::2, 1::2])  # each 2×2 block's centre pixel
    assert converted.params["read"].startswith("box reduce by 2")
