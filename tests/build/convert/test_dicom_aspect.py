"""Non-square DICOM pixels come out square, and boxes/masks in stored-pixel coordinates follow.

A 2:1 pixel (rows 1.0 mm apart, columns 0.5 mm) stored as an 80 x 40 grid shows a round object as
an ellipse twice as wide as tall. Like `dcmj2pnm +a +Sxf 1` (dcmtk 3.6.7 doubles the rows of such a
file, checked by hand), the coarser axis is enlarged and the finer one kept.
"""
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

sys.path.insert(0, str(Path(__file__).parent))
import factories_dicom as fd  # noqa: E402

from mmbu.build.convert.base import ConvertOptions  # noqa: E402
from mmbu.build.convert.batch import convert_paths  # noqa: E402
from mmbu.build.convert.dispatch import read_image  # noqa: E402
from mmbu.build.layouts.frames import geometry_of, map_boxes, map_mask  # noqa: E402
from mmbu.core.geometry import ConversionGeometry, Transform  # noqa: E402

ROWS, COLUMNS = 40, 80
CIRCLE_WINDOW = (500.0, 1000.0)  # stored 0 -> black, 1000 -> white (DICOM LINEAR: bounds 0 and 999)


def _ellipse(rows: int, columns: int, radius_rows: float, radius_columns: float) -> np.ndarray:
    """A filled ellipse centred on the grid: what a circle looks like when its pixels are not square."""
    yy, xx = np.mgrid[0:rows, 0:columns]
    return ((yy + 0.5 - rows / 2) / radius_rows) ** 2 + ((xx + 0.5 - columns / 2) / radius_columns) ** 2 <= 1


def _circle_file(path: Path, attributes: dict, rows: int = ROWS, columns: int = COLUMNS,
                 radius_rows: float = 15, radius_columns: float = 30) -> tuple[Path, np.ndarray]:
    inside = _ellipse(rows, columns, radius_rows, radius_columns)
    stored = np.where(inside, 1000, 0).astype(np.uint16)
    ds = fd.ct_dataset(stored, slope=1.0, intercept=0.0, window=CIRCLE_WINDOW, attributes=attributes)
    return fd.save(ds, path), inside


def _extent(bright: np.ndarray) -> tuple[int, int]:
    """(height, width) of the bright region's bounding box, in pixels."""
    rows, columns = np.nonzero(bright.any(axis=1))[0], np.nonzero(bright.any(axis=0))[0]
    return int(rows[-1] - rows[0] + 1), int(columns[-1] - columns[0] + 1)


def test_a_circle_on_two_to_one_pixels_comes_out_round(tmp_path):
    path, inside = _circle_file(tmp_path / "us.dcm", {"PixelSpacing": [1.0, 0.5]})
    assert _extent(inside) == (30, 60)  # as stored: twice as wide as tall
    converted = read_image(path)
    assert converted.pixels.shape == (80, 80)  # rows doubled, columns kept
    height, width = _extent(converted.pixels > 127)
    assert width == 60 and abs(height - width) <= 1
    assert converted.params["square_pixels"] == {
        "source": "PixelSpacing", "spacing_mm": [1.0, 0.5], "from_size": [80, 40], "to_size": [80, 80],
        "applied": True, "resample": "lanczos",
    }
    assert converted.geometry == ConversionGeometry((80, 40), (80, 80), (
        Transform("square_pixels", (80, 40), (80, 80), "lanczos"),))


def test_wide_pixels_widen_the_image_instead(tmp_path):
    path, _ = _circle_file(tmp_path / "wide.dcm", {"PixelSpacing": [0.5, 1.0]}, rows=80, columns=40,
                           radius_rows=30, radius_columns=15)
    converted = read_image(path)
    assert converted.pixels.shape == (80, 80)
    height, width = _extent(converted.pixels > 127)
    assert height == 60 and abs(height - width) <= 1
    assert converted.params["square_pixels"]["to_size"] == [80, 80]


def test_the_finer_axis_is_never_resampled(tmp_path):
    # a one-column line stays one column wide and exactly as bright: only the rows are interpolated
    stored = np.zeros((ROWS, COLUMNS), np.uint16)
    stored[:, 10] = 1000
    ds = fd.ct_dataset(stored, slope=1.0, intercept=0.0, window=CIRCLE_WINDOW, attributes={"PixelSpacing": [1.0, 0.5]})
    pixels = read_image(fd.save(ds, tmp_path / "line.dcm")).pixels
    assert pixels.shape == (80, 80)
    assert np.all(pixels[:, 10] == 255) and np.all(np.delete(pixels, 10, axis=1) == 0)


def test_imager_pixel_spacing_of_a_projection_radiograph_is_used(tmp_path):
    inside = _ellipse(ROWS, COLUMNS, 15, 30)
    stored = np.where(inside, 4000, 100).astype(np.uint16)
    path = fd.write_monochrome1(tmp_path / "cr.dcm", stored, window=(2048, 4096),
                                attributes={"ImagerPixelSpacing": [0.2, 0.1]})
    converted = read_image(path)
    assert converted.pixels.shape == (80, 80)
    height, width = _extent(converted.pixels < 64)  # MONOCHROME1: the dense disc is dark
    assert width == 60 and abs(height - width) <= 1
    assert converted.params["square_pixels"]["source"] == "ImagerPixelSpacing"
    assert converted.params["square_pixels"]["spacing_mm"] == [0.2, 0.1]


def test_pixel_aspect_ratio_alone_squares_an_rgb_ultrasound(tmp_path):
    inside = _ellipse(ROWS, COLUMNS, 15, 30)
    rgb = np.zeros((ROWS, COLUMNS, 3), np.uint8)
    rgb[inside] = (220, 40, 30)
    converted = read_image(fd.write_rgb(tmp_path / "us.dcm", rgb, attributes={"PixelAspectRatio": [2, 1]}))
    assert converted.pixels.shape == (80, 80, 3)
    height, width = _extent(converted.pixels[..., 0] > 110)
    assert width == 60 and abs(height - width) <= 1
    centre = converted.pixels[40, 40].astype(int)
    assert abs(centre[0] - 220) <= 2 and abs(centre[1] - 40) <= 2 and abs(centre[2] - 30) <= 2
    record = converted.params["square_pixels"]
    assert record["source"] == "PixelAspectRatio" and record["ratio"] == [2.0, 1.0]
    assert record["from_size"] == [80, 40] and record["to_size"] == [80, 80]


def test_pixel_spacing_wins_over_the_aspect_ratio(tmp_path):
    # dcmtk's order: the physical spacing, then the nominal ratio
    path, _ = _circle_file(tmp_path / "both.dcm", {"PixelSpacing": [1.0, 0.5], "PixelAspectRatio": [1, 1]})
    converted = read_image(path)
    assert converted.pixels.shape == (80, 80) and converted.params["square_pixels"]["source"] == "PixelSpacing"


@pytest.mark.parametrize("spacing", [[0.5, 0.5], [0.5, 0.503], [0.503, 0.5]])
def test_square_or_nearly_square_pixels_are_left_alone(tmp_path, spacing):
    path, inside = _circle_file(tmp_path / "ct.dcm", {"PixelSpacing": spacing})
    converted = read_image(path)
    assert converted.pixels.shape == (ROWS, COLUMNS)
    assert np.array_equal(converted.pixels > 127, inside)
    assert converted.params["square_pixels"]["applied"] is False
    assert converted.params["square_pixels"]["note"] == "square within 1%"
    assert "source_size" not in converted.params


def test_just_beyond_one_percent_is_corrected(tmp_path):
    path, _ = _circle_file(tmp_path / "ct.dcm", {"PixelSpacing": [0.5, 0.506]})
    converted = read_image(path)
    assert converted.pixels.shape == (ROWS, 81)  # 80 columns * 1.012, rounded


def test_a_file_without_pixel_shape_is_untouched(tmp_path):
    path, inside = _circle_file(tmp_path / "sc.dcm", {})
    converted = read_image(path)
    assert converted.pixels.shape == (ROWS, COLUMNS) and "square_pixels" not in converted.params


@pytest.mark.parametrize(("attributes", "note"), [
    ({"PixelSpacing": [0.0, 0.5]}, "PixelSpacing 0.0\\0.5 is not positive; pixels kept as stored"),
    ({"PixelSpacing": [0.5]}, "PixelSpacing 0.5 is not two numbers; pixels kept as stored"),
    ({"PixelAspectRatio": [20, 1]}, "a pixel 20 times taller than wide (or wider than tall) exceeds the plausible 16; "
                                    "pixels kept as stored"),
])
def test_an_unusable_pixel_shape_is_reported_not_applied(tmp_path, attributes, note):
    path, _ = _circle_file(tmp_path / "bad.dcm", attributes)
    converted = read_image(path)
    assert converted.pixels.shape == (ROWS, COLUMNS)
    assert converted.params["square_pixels"]["applied"] is False
    assert converted.params["square_pixels"]["note"] == note


def test_every_frame_of_a_multiframe_file_is_squared(tmp_path):
    inside = _ellipse(ROWS, COLUMNS, 15, 30)
    frames = np.stack([np.where(inside, 1024 + 1000 * k, 0) for k in (1, 2, 3)]).astype(np.uint16)
    path = fd.write_multiframe(tmp_path / "mf.dcm", frames, attributes={"PixelSpacing": [1.0, 0.5]})
    for frame in (0, "middle"):
        converted = read_image(path, ConvertOptions(frame=frame))
        assert converted.pixels.shape == (80, 80)
        assert converted.params["square_pixels"]["applied"] is True


def test_an_enhanced_multiframe_takes_the_spacing_of_its_frame(tmp_path):
    # shared Pixel Measures say 2:1; frame 1 overrides with square pixels
    inside = _ellipse(ROWS, COLUMNS, 15, 30)
    frames = np.stack([np.where(inside, 2048, 1024)] * 2).astype(np.uint16)
    path = fd.write_multiframe(tmp_path / "enh.dcm", frames, per_frame_windows=[(500, 1000), (500, 1000)],
                               shared_spacing=(1.0, 0.5), per_frame_spacing=[None, (0.5, 0.5)])
    first = read_image(path, ConvertOptions(frame=0))
    second = read_image(path, ConvertOptions(frame=1))
    assert first.pixels.shape == (80, 80) and first.params["square_pixels"]["spacing_mm"] == [1.0, 0.5]
    assert second.pixels.shape == (ROWS, COLUMNS) and second.params["square_pixels"]["applied"] is False


def test_a_dicom_label_mask_lands_on_the_image_grid_with_its_labels_kept(tmp_path):
    inside = _ellipse(ROWS, COLUMNS, 15, 30)
    image_path, _ = _circle_file(tmp_path / "image.dcm", {"PixelSpacing": [1.0, 0.5]})
    labels = fd.ct_dataset(inside.astype(np.uint16) * 3, slope=1.0, intercept=0.0, window=None,
                           attributes={"PixelSpacing": [1.0, 0.5]})
    mask = read_image(fd.save(labels, tmp_path / "mask.dcm"), ConvertOptions(as_mask=True))
    image = read_image(image_path)
    assert mask.pixels.shape == image.pixels.shape == (80, 80)
    assert set(np.unique(mask.pixels)) == {0, 3}
    assert mask.params["square_pixels"]["resample"] == "nearest"
    disagreement = np.count_nonzero((mask.pixels == 3) != (image.pixels > 127))
    assert disagreement <= 0.01 * mask.pixels.size


@pytest.mark.parametrize("max_size", [None, 50])
def test_stored_pixel_boxes_and_masks_still_cover_the_anatomy_in_the_png(tmp_path, max_size):
    """The build's own mapping (`frames.geometry_of`, used by `grounding.place_items`) on the
    conversion report: a box and a mask drawn on the stored 80 x 40 grid must land on the disc."""
    path, inside = _circle_file(tmp_path / "us.dcm", {"PixelSpacing": [1.0, 0.5]})
    (record,) = convert_paths([path], tmp_path / "out", ConvertOptions(max_size=max_size))
    assert record["status"] == "ok"
    with Image.open(record["output"]) as png:
        bright = np.asarray(png) > 127
    expected_size = (80, 80) if max_size is None else (50, 50)
    assert (record["width"], record["height"]) == expected_size
    steps = [("square_pixels", [80, 40], [80, 80])] + ([("resize", [80, 80], [50, 50])] if max_size else [])
    geometry = record["params"]["geometry"]  # squared first, then fitted
    assert geometry["stored_size"] == [80, 40]
    assert [(s["kind"], s["from_size"], s["to_size"]) for s in geometry["transforms"]] == steps

    frame = geometry_of(record)
    rows, columns = np.nonzero(inside.any(axis=1))[0], np.nonzero(inside.any(axis=0))[0]
    stored_box = (columns[0], rows[0], columns[-1] + 1, rows[-1] + 1)  # pixel edges, stored frame
    (x1, y1, x2, y2), = map_boxes([stored_box], frame)
    png_rows, png_columns = np.nonzero(bright.any(axis=1))[0], np.nonzero(bright.any(axis=0))[0]
    assert abs(x1 - png_columns[0]) <= 1 and abs(x2 - (png_columns[-1] + 1)) <= 1
    assert abs(y1 - png_rows[0]) <= 1 and abs(y2 - (png_rows[-1] + 1)) <= 1
    assert abs((x2 - x1) - (y2 - y1)) <= 1  # the box of a circle is square in the PNG

    mapped = map_mask(inside, frame)
    assert mapped.shape == bright.shape
    overlap = np.count_nonzero(mapped & bright) / np.count_nonzero(mapped | bright)
    assert overlap >= 0.95


@pytest.mark.parametrize("convert", [None, {"max_size": 50}])
def test_the_build_places_a_stored_grid_mask_and_its_box_on_the_squared_png(tmp_path, convert):
    """The whole build path: layout (DICOM image + PNG mask on the stored 80 x 40 grid) → the pipeline's
    `convert_samples` → `place_items`. The mask-grounded row's ROI and box must cover the disc the PNG
    shows, which is round now."""
    from support.build_manifests import make_manifest

    from mmbu.build.layouts import read_samples
    from mmbu.build.questions import place_items, task_items
    from mmbu.build.steps import convert_samples

    raw = tmp_path / "raw"
    (raw / "images").mkdir(parents=True)
    (raw / "masks").mkdir()
    _path, inside = _circle_file(raw / "images" / "us1.dcm", {"PixelSpacing": [1.0, 0.5]})
    Image.fromarray(inside.astype(np.uint8)).save(raw / "masks" / "us1.png")
    manifest = make_manifest({"kind": "image_mask_pairs", "images": "images/*.dcm", "masks": "masks/*.png",
                              "mask_values": {1: "gland"}},
                             labels={"gland": "gland"}, convert=convert,
                             tasks=["box_grounded_classification", "mask_grounded_classification"])
    samples, layout_exclusions = read_samples(manifest, raw)
    assert not layout_exclusions and samples[0].image_size == (COLUMNS, ROWS)
    kept, conversions, dropped = convert_samples(samples, manifest, tmp_path / "work", "test")
    assert not dropped
    placed, exclusions = place_items(task_items(kept, manifest), conversions, tmp_path / "roi")
    assert not exclusions

    side = 80 if convert is None else 50
    with Image.open(conversions[kept[0].sample_id].png) as png:
        bright = np.asarray(png) > 127
    assert bright.shape == (side, side)
    png_rows, png_columns = np.nonzero(bright.any(axis=1))[0], np.nonzero(bright.any(axis=0))[0]
    png_box = [png_columns[0], png_rows[0], png_columns[-1] + 1, png_rows[-1] + 1]
    for row in placed:
        assert row.image_size == (side, side)
        (box,) = row.boxes
        assert all(abs(a - b) <= 1 for a, b in zip(box, png_box)), (row.task, box, png_box)
    (roi,) = [np.asarray(Image.open(p.mask)) > 0 for p in placed if p.task == "mask_grounded_classification"]
    assert roi.shape == (side, side)
    assert np.count_nonzero(roi & bright) / np.count_nonzero(roi | bright) >= 0.95
