"""The display steps alone: arrays in, arrays out, no files."""
import numpy as np
import pytest

from mmbu.build.convert.base import ConversionError
from mmbu.build.convert.display import (
    center_width_to_bounds,
    composite_on_background,
    grey_to_uint8,
    invert,
    output_size,
    percentile_window,
    resize_longest_side,
    to_label_image,
    window_to_uint8,
)


def test_percentile_window_ignores_outliers_nan_and_inf():
    values = np.linspace(0.0, 1000.0, 10_001)
    values[:3] = [np.nan, np.inf, -np.inf]
    values[-1] = 1e9  # a single hot pixel must not set the top of the window
    lo, hi = percentile_window(values)
    assert 0.0 < lo < 10.0
    assert 990.0 < hi < 1000.0


def test_percentile_window_can_leave_out_background_value_or_mask():
    values = np.zeros((100, 100))
    values[40:60, 40:60] = np.linspace(100, 200, 400).reshape(20, 20)
    assert percentile_window(values, ignore=0)[0] >= 100
    background = values == 0
    assert percentile_window(values, ignore=background) == percentile_window(values, ignore=0)


def test_percentile_window_constant_and_empty_images():
    assert percentile_window(np.full((8, 8), 7.0)) == (7.0, 7.0)
    assert percentile_window(np.full((4, 4), np.nan)) == (0.0, 0.0)


def test_percentile_window_sparse_bright_spots_fall_back_to_full_range():
    values = np.zeros((100, 100))
    values[0, :5] = 50.0  # 0.05 % of pixels: above the 99.5th percentile
    assert percentile_window(values) == (0.0, 50.0)


def test_window_to_uint8_maps_bounds_and_clips():
    values = np.array([-100.0, 0.0, 40.0, 100.0, 300.0, np.nan, np.inf, -np.inf])
    assert window_to_uint8(values, 0.0, 100.0).tolist() == [0, 0, 102, 255, 255, 0, 255, 0]


def test_window_to_uint8_constant_image_is_black_not_a_division_by_zero():
    with np.errstate(all="raise"):
        out = window_to_uint8(np.full((3, 3), 5.0), 5.0, 5.0)
    assert out.dtype == np.uint8 and not out.any()
    assert window_to_uint8(np.array([0.0, 1.0]), 0.0, 0.0).tolist() == [0, 255]


def test_center_width_follows_dicom_linear_window():
    # CT soft tissue window 40/400: DICOM LINEAR is black at or below -160 and white above 239
    assert center_width_to_bounds(40, 400) == (-160.0, 239.0)
    assert center_width_to_bounds(0.5, 0.2) == pytest.approx((0.4, 0.6))
    with pytest.raises(ValueError):
        center_width_to_bounds(0, 0)


def test_grey_to_uint8_records_the_window_it_used():
    values = np.arange(-1000, 1000, dtype=np.float64).reshape(40, 50)
    pixels, record = grey_to_uint8(values, center_width=(40, 400))
    assert record["source"] == "user" and record["center"] == 40
    assert pixels[values <= -200].max() == 0 and pixels[values >= 300].min() == 255
    pixels, record = grey_to_uint8(values)
    assert record["source"].startswith("percentile")
    assert pixels.min() == 0 and pixels.max() == 255


def test_invert_swaps_black_and_white():
    assert invert(np.array([0, 100, 255], np.uint8)).tolist() == [255, 155, 0]
    with pytest.raises(TypeError):
        invert(np.array([1.0]))


def test_resize_keeps_aspect_and_never_enlarges():
    image = np.zeros((300, 600), np.uint8)
    assert resize_longest_side(image, 150, is_mask=False).shape == (75, 150)
    assert resize_longest_side(image, 1000, is_mask=False) is image
    assert resize_longest_side(np.zeros((10, 20, 3), np.uint8), 5, is_mask=False).shape == (2, 5, 3)
    assert output_size(1, 10_000, 100) == (1, 100)


def test_resize_mask_adds_no_new_labels_and_stays_aligned_with_image():
    mask = np.zeros((400, 400), np.uint16)
    mask[100:300, 100:200] = 3
    mask[100:300, 200:300] = 700
    image = np.where(mask > 0, 255, 0).astype(np.uint8)
    small_mask = resize_longest_side(mask, 100, is_mask=True)
    small_image = resize_longest_side(image, 100, is_mask=False)
    assert small_mask.dtype == np.uint16 and set(np.unique(small_mask)) == {0, 3, 700}
    assert small_mask.shape == small_image.shape == (100, 100)
    # the labelled block lands where the bright block of the image lands
    assert small_image[small_mask > 0].min() > 200
    assert small_image[small_mask == 0].max() < 30


def test_resize_float_and_bool_masks():
    mask = np.zeros((50, 50), bool)
    mask[10:20, 10:20] = True
    out = resize_longest_side(mask, 25, is_mask=True)
    assert out.dtype == bool and out.sum() == 25
    floats = mask.astype(np.float32) * 2.0
    assert set(np.unique(resize_longest_side(floats, 25, is_mask=True))) == {0.0, 2.0}


def test_to_label_image_keeps_values_and_rejects_what_would_need_rescaling():
    assert to_label_image(np.array([[0, 1], [2, 255]], np.int64)).tolist() == [[0, 1], [2, 255]]
    assert to_label_image(np.array([[True, False]])).tolist() == [[1, 0]]
    assert to_label_image(np.array([[0.0, 4.0]], np.float32)).dtype == np.uint8
    for bad, words in [
        (np.array([0, 300]), "0 to 300"),
        (np.array([-1, 2]), "-1 to 2"),
        (np.array([0.5]), "fractional"),
        (np.array([np.nan]), "NaN"),
    ]:
        with pytest.raises(ConversionError, match=words):
            to_label_image(bad)


def test_composite_on_background():
    rgba = np.array([[[255, 0, 0, 255], [255, 0, 0, 0], [0, 0, 0, 128]]], np.uint8)
    out = composite_on_background(rgba)
    assert out.tolist() == [[[255, 0, 0], [255, 255, 255], [127, 127, 127]]]
    assert composite_on_background(rgba, (0, 0, 0))[0, 1].tolist() == [0, 0, 0]
