"""MRC maps, tomograms and image stacks, written by mrcfile itself (CCP-EM's reference implementation).

Orientation: mrcfile gives (z, y, x) arrays; the section is shown y up (array row 0 at the bottom), as
IMOD's 3dmod and the MRC2014 convention (origin bottom left) show it; napari shows row 0 at the top.
"""
from __future__ import annotations

import warnings
from pathlib import Path

import mrcfile
import numpy as np
import pytest

from mmbu.build.convert.base import ConversionError, ConvertOptions
from mmbu.build.convert.display import window_to_uint8
from mmbu.build.convert.dispatch import read_image
from mmbu.build.convert.sniff import identify


def write_mrc(path: Path, data: np.ndarray, voxel_size: tuple[float, float, float] = (10.0, 10.0, 10.0),
              image_stack: bool = False) -> Path:
    with mrcfile.new(str(path), overwrite=True) as mrc:
        mrc.set_data(data)
        mrc.voxel_size = voxel_size
        if image_stack:
            mrc.set_image_stack()
    return path


def percentile_expected(section: np.ndarray) -> np.ndarray:
    """The microscopy rule: a 0.5-99.5 percentile window over every value of the section, y up."""
    values = section.astype(np.float64)
    lo, hi = np.percentile(values, [0.5, 99.5])
    return window_to_uint8(values[::-1], float(lo), float(hi))


def tomogram(shape=(7, 12, 16), dtype=np.float32, seed=3) -> np.ndarray:
    return np.random.default_rng(seed).normal(100, 20, shape).astype(dtype)


def test_the_middle_section_is_shown_y_up_with_the_microscopy_window(tmp_path):
    data = tomogram()
    data[3, 0, 0] = 1e6  # row 0, column 0 of the middle section: the bottom-left pixel once shown
    converted = read_image(write_mrc(tmp_path / "tomo.mrc", data))

    assert converted.format == "mrc" and converted.pixels.shape == (12, 16)
    np.testing.assert_array_equal(converted.pixels, percentile_expected(data[3]))
    assert converted.pixels[-1, 0] == 255 and converted.pixels[0, 0] != 255
    params = converted.params
    assert (params["z"], params["n_z"], params["z_choice"], params["kind"]) == (3, 7, "middle", "volume")
    assert params["mode"] == 2 and params["dtype"] == "float32"
    assert params["voxel_size_angstrom"] == [10.0, 10.0, 10.0] and params["square_pixels_from"] is None
    assert params["map_axes"] == [1, 2, 3]
    assert params["window"]["source"] == "percentile 0.5-99.5"


@pytest.mark.parametrize("dtype, mode", [(np.int16, 1), (np.uint16, 6), (np.float16, 12), (np.int8, 0)])
def test_16_bit_half_float_and_signed_byte_modes_are_windowed(tmp_path, dtype, mode):
    rng = np.random.default_rng(5)
    data = (rng.integers(-100, 100, (3, 9, 11)) + (200 if dtype == np.uint16 else 0)).astype(dtype)
    converted = read_image(write_mrc(tmp_path / "map.mrc", data))
    assert converted.params["mode"] == mode
    np.testing.assert_array_equal(converted.pixels, percentile_expected(data[1]))


def test_imod_unsigned_bytes_are_kept_as_8_bit(tmp_path):
    """IMOD writes mode 0 as unsigned bytes unless imodFlags says signed (bio3d.colorado.edu mrc_format.txt)."""
    data = np.arange(3 * 4 * 5, dtype=np.uint8).reshape(3, 4, 5) * 4  # values up to 236: negative as int8
    path = write_mrc(tmp_path / "imod.rec", data.view(np.int8))
    with mrcfile.open(str(path), mode="r+") as mrc:
        raw = bytearray(mrc.header.tobytes())
        raw[152:160] = np.array([1146047817, 0], "<i4").tobytes()  # imodStamp, imodFlags without "signed"
        mrc.header[...] = np.frombuffer(bytes(raw), dtype=mrc.header.dtype)[0]
    converted = read_image(path)
    np.testing.assert_array_equal(converted.pixels, data[1][::-1])  # 8-bit kept, y up
    assert converted.params["mode_0"].startswith("unsigned bytes")


def test_z_index_image_stack_and_volume_stack(tmp_path):
    data = tomogram((5, 6, 8))
    assert read_image(write_mrc(tmp_path / "a.mrc", data), ConvertOptions(z=1)).params["z"] == 1
    np.testing.assert_array_equal(read_image(tmp_path / "a.mrc", ConvertOptions(z=4)).pixels,
                                  percentile_expected(data[4]))
    stack = read_image(write_mrc(tmp_path / "particles.mrcs", data, image_stack=True), ConvertOptions(z=2))
    assert stack.params["kind"] == "image stack"
    np.testing.assert_array_equal(stack.pixels, percentile_expected(data[2]))
    volumes = tomogram((3, 4, 6, 8))  # (volume, z, y, x)
    converted = read_image(write_mrc(tmp_path / "vols.mrc", volumes), ConvertOptions(frame=2, z=0))
    assert (converted.params["kind"], converted.params["volume_index"], converted.params["n_volumes"]) == \
        ("volume stack", 2, 3)
    np.testing.assert_array_equal(converted.pixels, percentile_expected(volumes[2, 0]))
    with pytest.raises(ConversionError, match=r"z index 9 is outside 0\.\.4 of .*a\.mrc"):
        read_image(tmp_path / "a.mrc", ConvertOptions(z=9))
    by_slice = read_image(tmp_path / "a.mrc", ConvertOptions(slice=3, z=1))  # an index in `slice` comes first
    assert (by_slice.params["z"], by_slice.params["z_choice"]) == (3, "index")


def test_a_mask_is_read_without_scaling_and_aligns_with_its_image(tmp_path):
    image = tomogram((6, 10, 14))
    labels = np.zeros(image.shape, np.uint8)
    labels[4, 1:3, 2:6] = 1  # membrane: bright in the image
    labels[4, 7:9, 10:13] = 2
    labels[1, 5, 5] = 1
    image[labels > 0] = 1000.0
    write_mrc(tmp_path / "tomo.mrc", image)
    write_mrc(tmp_path / "tomo_labels.mrc", labels)
    options = {"slice": "mask_max_area", "slice_mask": tmp_path / "tomo_labels.mrc"}

    shown = read_image(tmp_path / "tomo.mrc", ConvertOptions(**options))
    mask = read_image(tmp_path / "tomo_labels.mrc", ConvertOptions(as_mask=True, **options))

    assert shown.params["z"] == mask.params["z"] == 4 and shown.params["z_choice"] == "mask_max_area"
    np.testing.assert_array_equal(mask.pixels, labels[4][::-1])  # values kept, the same y flip
    assert set(np.unique(mask.pixels)) == {0, 1, 2} and mask.params["window"] is None
    assert (shown.pixels[mask.pixels > 0] == 255).all()  # the bright voxels are exactly under the labels
    assert mask.pixels[-2, 2] == 1  # array row 1 is the second row from the bottom


def test_non_square_voxels_are_resampled_to_square_pixels(tmp_path):
    data = tomogram((3, 10, 12))
    converted = read_image(write_mrc(tmp_path / "aniso.mrc", data, voxel_size=(5.0, 10.0, 5.0)))
    assert converted.pixels.shape == (20, 12)  # y voxels twice as tall: rows doubled
    assert converted.params["square_pixels_from"] == [10, 12]
    kept = read_image(tmp_path / "aniso.mrc", ConvertOptions(square_pixels=False))
    assert kept.pixels.shape == (10, 12)


def test_mrc_is_sniffed_by_its_map_stamp_under_any_name(tmp_path):
    path = write_mrc(tmp_path / "volume.dat", tomogram((2, 4, 4)))
    assert identify(path).format == "mrc"
    assert read_image(path).pixels.shape == (4, 4)


def test_bad_files_give_one_sentence_naming_them(tmp_path):
    good = write_mrc(tmp_path / "good.mrc", tomogram((4, 8, 8))).read_bytes()
    (tmp_path / "truncated.mrc").write_bytes(good[:-100])
    with pytest.raises(ConversionError, match=r"truncated\.mrc is a truncated MRC file: its header's size 8×8×4 "
                                              r"of mode 2 needs 1024 bytes of data after 1024 header bytes, but the "
                                              r"file holds 924"):
        read_image(tmp_path / "truncated.mrc")
    stampless = bytearray(good)
    stampless[208:212] = b"XXXX"
    (tmp_path / "stampless.mrc").write_bytes(bytes(stampless))
    with pytest.raises(ConversionError, match=r"stampless\.mrc is not a readable MRC file \(Map ID string not found"):
        read_image(tmp_path / "stampless.mrc")
    (tmp_path / "header_only.mrc").write_bytes(good[:300])
    with pytest.raises(ConversionError, match=r"header_only\.mrc is not a readable MRC file \(Couldn't read enough"):
        read_image(tmp_path / "header_only.mrc")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        write_mrc(tmp_path / "fft.mrc", np.zeros((2, 4, 4), np.complex64))
    with pytest.raises(ConversionError, match=r"fft\.mrc holds complex values \(MRC mode 4"):
        read_image(tmp_path / "fft.mrc")
    write_mrc(tmp_path / "many.mrc", np.full((2, 4, 4), 300, np.int16))
    with pytest.raises(ConversionError, match=r"many\.mrc: the mask holds label values from 300 to 300"):
        read_image(tmp_path / "many.mrc", ConvertOptions(as_mask=True))
