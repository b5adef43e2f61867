"""NIfTI → one radiological slice: orientation, slice choice, 4-D, windowing and image/mask alignment."""
from __future__ import annotations

import gzip
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import nibabel as nib
import numpy as np
import pytest
from click.testing import CliRunner
from PIL import Image

sys.path.insert(0, str(Path(__file__).parent))

from factories_volume import ANISOTROPIC_MM, SHAPE, labels, mask_of_marker, phantom, write_nifti  # noqa: E402

from mmbu.build.convert.base import ConversionError, ConvertOptions  # noqa: E402
from mmbu.build.convert.nifti import read  # noqa: E402
from mmbu.cli import cli  # noqa: E402

ORIENTATIONS = ["RAS", "LPS", "PIR", "ASL", "ILP"]


def expected_view(canonical: np.ndarray, axis: int, index: int) -> np.ndarray:
    """What a radiologist sees, built independently: rows from high to low of the second remaining axis."""
    plane = np.take(canonical, index, axis=axis)
    return plane.T[::-1, ::-1]


@pytest.mark.parametrize("axcodes", ORIENTATIONS)
@pytest.mark.parametrize("axis", [0, 1, 2])
def test_every_orientation_gives_the_canonical_slice(tmp_path, axcodes, axis):
    canonical = labels()
    path = write_nifti(tmp_path / f"labels_{axcodes}.nii", canonical, axcodes)
    converted = read(path, ConvertOptions(as_mask=True, axis=axis))
    middle = SHAPE[axis] // 2
    np.testing.assert_array_equal(converted.pixels, expected_view(canonical, axis, middle))
    assert converted.params["axcodes_before"] == axcodes
    assert converted.params["axcodes_after"] == "RAS"
    assert converted.params["slice_index"] == middle


def test_axial_marker_in_right_anterior_appears_left_top(tmp_path):
    path = write_nifti(tmp_path / "lps.nii", phantom(), "LPS")
    z_marker = SHAPE[2] - 5
    converted = read(path, ConvertOptions(axis=2, slice=z_marker))
    pixels = converted.pixels
    assert pixels.shape == (SHAPE[1], SHAPE[0])  # rows = y (A-P), columns = x (R-L)
    bright = np.argwhere(pixels == 255)
    assert bright.size, "the marker must be visible"
    rows, cols = bright[:, 0], bright[:, 1]
    assert rows.max() < SHAPE[1] // 2, "anterior must be at the top"
    assert cols.max() < SHAPE[0] // 2, "the patient's right must be on the image's left"


def test_coronal_and_sagittal_conventions(tmp_path):
    path = write_nifti(tmp_path / "pir.nii", phantom(), "PIR")
    coronal = read(path, ConvertOptions(axis=1, slice=SHAPE[1] - 5)).pixels  # rows = z, columns = x
    rows, cols = np.nonzero(coronal == 255)
    assert rows.max() < SHAPE[2] // 2 and cols.max() < SHAPE[0] // 2  # superior up, right on the left
    sagittal = read(path, ConvertOptions(axis=0, slice=SHAPE[0] - 5)).pixels  # rows = z, columns = y
    rows, cols = np.nonzero(sagittal == 255)
    assert rows.max() < SHAPE[2] // 2 and cols.max() < SHAPE[1] // 2  # superior up, anterior on the left


def test_params_record_the_slice_in_both_frames(tmp_path):
    # PIR: canonical z (S) is stored as the original axis 1, running inferior (flipped)
    path = write_nifti(tmp_path / "pir.nii", labels(), "PIR", zooms=ANISOTROPIC_MM)
    params = read(path, ConvertOptions(as_mask=True, axis=2, slice=3)).params
    assert params["axis_original"] == 1
    assert params["slice_index"] == 3
    assert params["slice_index_original"] == SHAPE[2] - 1 - 3
    assert params["axis_name"] == "axial" and params["display"] == "radiological"
    assert params["volume_index"] is None and params["nifti_version"] == 1
    assert params["pixel_spacing_mm"] == [1.5, 1.0]  # rows along y, columns along x


def test_thick_slices_are_stretched_to_square_pixels_for_image_and_mask_alike(tmp_path):
    volume = phantom()
    image_path = write_nifti(tmp_path / "img.nii.gz", volume, "LPS", zooms=ANISOTROPIC_MM)
    mask_path = write_nifti(tmp_path / "msk.nii.gz", mask_of_marker(volume), "LPS", zooms=ANISOTROPIC_MM)
    options = dict(axis=1, slice=SHAPE[1] - 5)  # coronal: rows along z (2.5 mm), columns along x (1 mm)
    image = read(image_path, ConvertOptions(**options))
    mask = read(mask_path, ConvertOptions(as_mask=True, **options))
    assert image.params["pixel_spacing_mm"] == [2.5, 1.0]
    assert image.params["square_pixels_from"] == [SHAPE[2], SHAPE[0]]
    assert image.pixels.shape == mask.pixels.shape == (40, SHAPE[0])  # 16 rows × 2.5 = 40
    rows, cols = np.nonzero(mask.pixels)
    assert 7 <= rows.max() - rows.min() + 1 <= 8 and cols.max() - cols.min() + 1 == 3  # 3 voxels: 7.5 mm tall, 3 mm wide
    assert image.pixels[mask.pixels == 1].mean() > 200 > image.pixels[mask.pixels == 0].mean() + 100
    axial = read(image_path, ConvertOptions(axis=2))
    assert axial.params["square_pixels_from"] == [SHAPE[1], SHAPE[0]] and axial.pixels.shape == (36, SHAPE[0])
    iso = read(write_nifti(tmp_path / "iso.nii", volume), ConvertOptions(axis=1))
    assert iso.params["square_pixels_from"] is None


def test_percentile_window_ignores_air_and_survives_nan_and_inf(tmp_path):
    volume = phantom()
    volume[5, 5, :] = np.nan
    volume[6, 6, :] = np.inf
    path = write_nifti(tmp_path / "nan.nii", volume, "RAS")
    converted = read(path, ConvertOptions(axis=2, slice=8))
    window = converted.params["window"]
    assert np.isfinite(window["lo"]) and np.isfinite(window["hi"])
    assert window["lo"] >= 100, "zero air must not pull the window down"
    view = converted.pixels
    expected_nan = expected_view(np.isnan(volume), 2, 8)
    assert (view[expected_nan] == 0).all()
    body = expected_view(volume > 0, 2, 8) & ~expected_view(~np.isfinite(volume), 2, 8)
    assert view[body].std() > 20, "the body ramp must keep its contrast"


def test_constant_and_empty_slices_are_black_not_errors(tmp_path):
    constant = np.full(SHAPE, 7.0, np.float32)
    converted = read(write_nifti(tmp_path / "c.nii", constant), ConvertOptions())
    assert converted.pixels.dtype == np.uint8 and not converted.pixels.any()
    empty = read(write_nifti(tmp_path / "e.nii", np.zeros(SHAPE, np.float32)), ConvertOptions())
    assert not empty.pixels.any()


def test_user_window_overrides_percentiles(tmp_path):
    path = write_nifti(tmp_path / "w.nii", phantom())
    converted = read(path, ConvertOptions(window=(150.0, 100.0), slice=8))
    assert converted.params["window"]["source"] == "user"
    view = converted.pixels
    values = expected_view(phantom(), 2, 8)
    assert (view[values >= 200] == 255).all() and (view[(values > 0) & (values < 100)] == 0).all()


def test_4d_middle_volume_and_index(tmp_path):
    canonical = np.stack([labels() * 0 + t + 1 for t in range(5)], axis=-1).astype(np.uint8)
    path = write_nifti(tmp_path / "four.nii.gz", canonical, "LPS")
    middle = read(path, ConvertOptions(as_mask=True))
    assert middle.frame == 2 and middle.params["n_volumes"] == 5
    assert (middle.pixels == 3).all()
    first = read(path, ConvertOptions(as_mask=True, frame=0))
    assert (first.pixels == 1).all() and first.params["volume_index"] == 0
    with pytest.raises(ConversionError, match=r"volume index 9 is outside 0\.\.4"):
        read(path, ConvertOptions(frame=9))


def test_nifti2_and_gzip(tmp_path):
    canonical = labels()
    path = write_nifti(tmp_path / "two.nii.gz", canonical, "ASL", version=2)
    assert isinstance(nib.load(str(path)), nib.Nifti2Image)
    converted = read(path, ConvertOptions(as_mask=True, axis=1, slice=4))
    np.testing.assert_array_equal(converted.pixels, expected_view(canonical, 1, 4))
    assert converted.params["nifti_version"] == 2


@pytest.mark.parametrize("max_size", [None, 30])
def test_image_and_mask_align_pixel_for_pixel(tmp_path, max_size):
    volume = phantom((40, 48, 32))
    image_path = write_nifti(tmp_path / "img.nii.gz", volume, "PIR")
    mask_path = write_nifti(tmp_path / "msk.nii.gz", mask_of_marker(volume), "PIR")
    options = dict(axis=2, slice="mask_max_area", slice_mask=mask_path, max_size=max_size)
    image = read(image_path, ConvertOptions(**options))
    mask = read(mask_path, ConvertOptions(as_mask=True, **options))
    assert image.pixels.shape == mask.pixels.shape == ((48, 40) if max_size is None else (30, 25))
    assert set(np.unique(mask.pixels)) == {0, 1}
    assert image.params["slice_index"] == mask.params["slice_index"] == 32 - 6
    if max_size is None:  # same grid, same transform: the marker is exactly the mask
        np.testing.assert_array_equal(image.pixels == 255, mask.pixels == 1)
    else:  # LANCZOS blurs the image's edges, nearest keeps the labels: the centres coincide
        mask_centre = np.argwhere(mask.pixels == 1).mean(axis=0)
        weights = np.where(image.pixels > 200, image.pixels, 0).astype(float)
        image_centre = (np.argwhere(weights > 0) * weights[weights > 0][:, None]).sum(axis=0) / weights.sum()
        assert np.abs(mask_centre - image_centre).max() <= 0.5
        assert image.pixels[mask.pixels == 1].mean() > 200 > image.pixels[mask.pixels == 0].mean() + 100


def test_mask_max_area_picks_the_largest_slice(tmp_path):
    mask = np.zeros(SHAPE, np.uint8)
    mask[5:8, 5:8, 3] = 1  # 9 voxels
    mask[2:12, 2:12, 11] = 2  # 100 voxels: the winner
    mask[4:9, 4:9, 13] = 1  # 25 voxels
    mask_path = write_nifti(tmp_path / "m.nii.gz", mask, "ILP")
    image_path = write_nifti(tmp_path / "i.nii.gz", phantom(), "ILP")
    converted = read(image_path, ConvertOptions(slice="mask_max_area", slice_mask=mask_path))
    assert converted.params["slice_index"] == 11 and converted.params["slice_choice"] == "mask_max_area"
    own = read(mask_path, ConvertOptions(as_mask=True, slice="mask_max_area"))
    assert own.params["slice_index"] == 11 and (own.pixels == 2).sum() == 100


def test_mask_max_area_rejects_a_mask_on_another_grid(tmp_path):
    image_path = write_nifti(tmp_path / "i.nii", phantom())
    mask_path = write_nifti(tmp_path / "m.nii", mask_of_marker(phantom((10, 10, 10))))
    with pytest.raises(ConversionError, match="does not share the grid"):
        read(image_path, ConvertOptions(slice="mask_max_area", slice_mask=mask_path))
    with pytest.raises(ConversionError, match="needs a slice mask"):
        read(image_path, ConvertOptions(slice="mask_max_area"))


def test_out_of_range_slice_and_axis(tmp_path):
    path = write_nifti(tmp_path / "i.nii", phantom())
    with pytest.raises(ConversionError, match=r"slice 99 is outside 0\.\.15 along axial"):
        read(path, ConvertOptions(slice=99))
    with pytest.raises(ConversionError, match="axis 3 is not a spatial axis"):
        read(path, ConvertOptions(axis=3))


def test_rgb_voxels_stay_colour_with_the_same_orientation(tmp_path):
    canonical = np.zeros(SHAPE, dtype=[("R", "u1"), ("G", "u1"), ("B", "u1")])
    canonical["R"] = 20
    marker = (slice(SHAPE[0] - 6, SHAPE[0] - 3), slice(SHAPE[1] - 6, SHAPE[1] - 3), slice(None))
    canonical["R"][marker] = 250  # right-anterior column, every slice
    canonical["G"][marker] = 100
    path = write_nifti(tmp_path / "rgb.nii.gz", canonical, "LPS")
    converted = read(path, ConvertOptions())
    assert converted.mode == "RGB" and converted.params["window"] == {"source": "RGB voxels kept"}
    rows, cols = np.nonzero(converted.pixels[..., 0] == 250)
    assert rows.max() < SHAPE[1] // 2 and cols.max() < SHAPE[0] // 2  # still left-top: right-anterior
    assert tuple(converted.pixels[rows[0], cols[0]]) == (250, 100, 0) and tuple(converted.pixels[-1, -1]) == (20, 0, 0)
    with pytest.raises(ConversionError, match="holds RGB voxels, so it is not a label mask"):
        read(path, ConvertOptions(as_mask=True))


def test_fractional_mask_is_refused(tmp_path):
    path = write_nifti(tmp_path / "f.nii", phantom() / 3.0)
    with pytest.raises(ConversionError, match="fractional"):
        read(path, ConvertOptions(as_mask=True))


def test_truncated_and_corrupt_files_give_one_sentence(tmp_path):
    good = write_nifti(tmp_path / "good.nii.gz", phantom(), "LPS")
    truncated = tmp_path / "truncated.nii.gz"
    truncated.write_bytes(good.read_bytes()[: len(good.read_bytes()) // 2])
    with pytest.raises(ConversionError, match="truncated.nii.gz") as caught:
        read(truncated, ConvertOptions())
    assert "\n" not in str(caught.value)
    garbage = tmp_path / "garbage.nii"
    garbage.write_bytes(b"not a nifti header" * 40)
    with pytest.raises(ConversionError, match="garbage.nii is not a readable NIfTI file"):
        read(garbage, ConvertOptions())
    short_raw = tmp_path / "short.nii"
    short_raw.write_bytes(gzip.decompress(good.read_bytes())[:600])
    with pytest.raises(ConversionError, match="short.nii"):
        read(short_raw, ConvertOptions())


def test_only_the_shown_slice_is_read(tmp_path):
    """A 64 MiB volume converts with a peak far below its size: the proxy is sliced, never loaded."""
    path = tmp_path / "big.nii"
    nib.save(nib.Nifti1Image(np.ones((256, 256, 256), np.float32), np.eye(4)), str(path))
    script = textwrap.dedent(
        f"""
        import tracemalloc
        from pathlib import Path
        from mmbu.build.convert.base import ConvertOptions
        from mmbu.build.convert.nifti import read
        tracemalloc.start()
        read(Path({str(path)!r}), ConvertOptions(axis=0))
        print(tracemalloc.get_traced_memory()[1])
        """
    )
    peak = int(subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout)
    assert peak < 16 * 2**20, f"peak {peak / 2**20:.1f} MiB suggests the whole 64 MiB volume was loaded"


def test_mmbu_convert_writes_aligned_image_and_mask_pngs(tmp_path):
    volume = phantom((40, 48, 32))
    image_path = write_nifti(tmp_path / "case.nii.gz", volume, "LPS")
    mask_path = write_nifti(tmp_path / "case_seg.nii.gz", mask_of_marker(volume), "LPS")
    common = ["--slice", "mask_max_area", "--slice-mask", str(mask_path), "--axis", "2"]
    first = CliRunner().invoke(cli, ["convert", str(image_path), "--out", str(tmp_path / "img"), *common])
    second = CliRunner().invoke(cli, ["convert", str(mask_path), "--out", str(tmp_path / "msk"), "--as-mask", *common])
    assert first.exit_code == 0 and second.exit_code == 0, first.output + second.output
    image = np.asarray(Image.open(tmp_path / "img" / "case.png"))
    mask = np.asarray(Image.open(tmp_path / "msk" / "case_seg.png"))
    np.testing.assert_array_equal(image == 255, mask == 1)
    record = json.loads((tmp_path / "img" / "convert-report.jsonl").read_text())
    assert record["format"] == "nifti" and record["params"]["axcodes_before"] == "LPS"
    assert record["params"]["slice_choice"] == "mask_max_area" and record["mode"] == "L"


def _with_intent(path: Path, intent: str) -> Path:
    """Rewrite a NIfTI file with `intent` (nibabel sets the intent code in the header)."""
    image = nib.load(str(path), mmap=False)  # the file is overwritten: no memory map may point into it
    header = image.header.copy()
    header.set_intent(intent)
    nib.save(nib.Nifti1Image(np.asanyarray(image.dataobj), image.affine, header), str(path))
    return path


def _colour_picture(shape_xy: tuple[int, int] = (20, 12)) -> np.ndarray:
    """(X, Y, 3) uint8 in canonical RAS+: red where the patient's right-anterior is, a green ramp elsewhere."""
    x, y = np.indices(shape_xy)
    rgb = np.zeros((*shape_xy, 3), np.uint8)
    rgb[..., 1] = (x * 7 + y * 3).astype(np.uint8)
    rgb[-5:, -4:] = (250, 10, 10)  # high x = patient's right, high y = anterior
    return rgb


@pytest.mark.parametrize("axcodes", ["RAS", "LPS"])
def test_2d_rgb_vector_nifti_is_colour_in_radiological_view(tmp_path, axcodes):
    rgb = _colour_picture()
    path = write_nifti(tmp_path / "photo.nii.gz", rgb[:, :, None, :], axcodes)  # (X, Y, 1, 3)
    converted = read(_with_intent(path, "vector"), ConvertOptions())
    expected = np.stack([rgb[..., c].T[::-1, ::-1] for c in range(3)], axis=-1)  # canonical (x, y) shown
    assert converted.mode == "RGB"
    np.testing.assert_array_equal(converted.pixels, expected)
    assert tuple(converted.pixels[0, 0]) == (250, 10, 10)  # right-anterior at the top left
    assert converted.params["rgb_components"] == {"dimension": 4, "count": 3, "intent": "vector"}
    assert converted.params["volume_index"] is None
    with pytest.raises(ConversionError, match="holds RGB vectors"):
        read(path, ConvertOptions(as_mask=True))


def test_5d_itk_rgb_vector_is_windowed_once_over_the_three_components(tmp_path):
    rgb = _colour_picture().astype(np.float32) * 16.0 + 100.0  # 12-bit-like float colours
    volume = np.repeat(rgb[:, :, None, None, :], 5, axis=2)  # (X, Y, Z=5, 1, 3) as ITK writes it
    volume[:, :, 2, 0, 2] += 300.0  # the middle slice is bluer, so the slice choice shows
    path = _with_intent(write_nifti(tmp_path / "itk.nii", volume, "LPS"), "vector")
    converted = read(path, ConvertOptions())
    shown = volume[:, :, 2, 0, :]
    lo, hi = np.percentile(shown, [0.5, 99.5])
    expected = np.clip(np.rint((shown - lo) * 255.0 / (hi - lo)), 0, 255).transpose(1, 0, 2)[::-1, ::-1]
    assert np.abs(converted.pixels.astype(int) - expected).max() <= 1
    assert converted.params["rgb_components"]["dimension"] == 5
    assert converted.params["window"]["source"].endswith("over R, G and B together")


def test_4d_time_series_of_three_volumes_without_a_vector_intent_stays_grey(tmp_path):
    series = np.zeros((8, 6, 1, 3), np.float32)
    series[..., 1] = np.arange(48, dtype=np.float32).reshape(8, 6, 1)
    converted = read(write_nifti(tmp_path / "series.nii", series), ConvertOptions())
    assert converted.mode == "L" and converted.params["volume_index"] == 1
    assert converted.params["rgb_components"] is None
