"""Whole-slide images: level choice, vendors openslide recognises, transparency, bounded memory."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import tifffile
from click.testing import CliRunner
from PIL import Image

sys.path.insert(0, str(Path(__file__).parent))

from factories_slide import (  # noqa: E402
    LEVEL_COLOURS,
    quadrant_image,
    write_mrxs,
    write_ndpi,
    write_pyramid_tiff,
    write_single_level_tiff,
    write_sparse_tiff,
)

from mmbu.build.convert.base import ConversionError, ConvertOptions  # noqa: E402
from mmbu.build.convert import wsi  # noqa: E402
from mmbu.build.convert.wsi import plan_read, read  # noqa: E402
from mmbu.cli import cli  # noqa: E402

FIXTURES = Path(__file__).parent / "fixtures"


def close_to(pixel, colour, tolerance=12) -> bool:
    return bool(np.all(np.abs(np.asarray(pixel, int) - np.asarray(colour, int)) <= tolerance))


@pytest.mark.parametrize(
    ("max_size", "level"),
    [(4096, 0), (3000, 0), (2048, 1), (1500, 1), (1024, 2), (600, 2), (512, 3), (100, 3)],
)
def test_pyramid_level_is_the_smallest_not_below_the_output(tmp_path, max_size, level):
    path = write_pyramid_tiff(tmp_path / "pyramid.tiff")
    converted = read(path, ConvertOptions(max_size=max_size))
    assert converted.params["vendor"] == "generic-tiff"
    assert converted.params["level"] == level
    assert converted.params["level_dimensions"] == [4096 >> level, 3072 >> level]
    assert max(converted.pixels.shape[:2]) == max_size
    assert close_to(converted.pixels[converted.height // 2, converted.width // 2], LEVEL_COLOURS[level])


def test_default_output_is_2048_and_params_are_complete(tmp_path):
    converted = read(write_pyramid_tiff(tmp_path / "pyramid.tiff"), ConvertOptions())
    assert (converted.width, converted.height) == (2048, 1536)
    assert converted.mode == "RGB" and converted.format == "wsi"
    params = converted.params
    assert params["level"] == 1 and params["level_downsample"] == 2.0
    assert params["downsample"] == 2.0 and params["level0_dimensions"] == [4096, 3072]
    assert params["mpp"] == [pytest.approx(0.25), pytest.approx(0.25)]
    assert params["background"] == "#FFFFFF"


def test_plan_never_enlarges_and_keeps_tiles_multiple_of_the_factor():
    levels = ((20480, 20480),)
    plan = plan_read(levels, (1.0,), 2048, lambda downsample: 0)
    assert plan.reduce_factor == 10 and plan.tile_size % 10 == 0 and plan.output_size == (2048, 2048)
    small = plan_read(((300, 200),), (1.0,), 2048, lambda downsample: 0)
    assert small.output_size == (300, 200) and small.reduce_factor == 1


def test_openslide_python_sample_svs_and_dicom():
    svs = read(FIXTURES / "small.svs", ConvertOptions())
    assert svs.params["vendor"] == "aperio" and svs.pixels.shape == (16, 16, 3)
    assert svs.params["mpp"] == [0.499, 0.499] and svs.params["objective_power"] == 20.0
    dicom = read(FIXTURES / "boxes_0.dcm", ConvertOptions())
    assert dicom.params["vendor"] == "dicom"
    np.testing.assert_array_equal(dicom.pixels, svs.pixels)  # the same 16×16 sample in two containers
    boxes = read(FIXTURES / "boxes.tiff", ConvertOptions(max_size=75))
    assert boxes.params["level"] == 2 and boxes.pixels.shape == (62, 75, 3)


def test_ndpi_tagged_tiff_is_read_as_hamamatsu(tmp_path):
    path = write_ndpi(tmp_path / "slide.ndpi", quadrant_image(300))
    converted = read(path, ConvertOptions(max_size=300))
    assert converted.params["vendor"] == "hamamatsu"
    assert converted.params["level"] == 1 and converted.params["mpp"] == [pytest.approx(0.5), pytest.approx(0.5)]
    pixels = converted.pixels
    assert close_to(pixels[60, 60], (220, 40, 40)) and close_to(pixels[60, 240], (40, 220, 40))
    assert close_to(pixels[240, 60], (40, 40, 220)) and close_to(pixels[240, 240], (220, 220, 40))


def test_mrxs_file_and_its_directory(tmp_path):
    slide = write_mrxs(tmp_path / "case")
    for source in (slide, tmp_path / "case"):
        converted = read(source, ConvertOptions())
        assert converted.params["vendor"] == "mirax" and converted.params["slide_file"] == "slide.mrxs"
        assert converted.pixels.shape == (512, 512, 3) and converted.params["level"] == 0
        assert close_to(converted.pixels[100, 400], (40, 220, 40))
    smaller = read(slide, ConvertOptions(max_size=256))
    assert smaller.params["level"] == 1 and close_to(smaller.pixels[200, 200], (220, 220, 40))


def test_mrxs_without_its_folder_is_one_sentence(tmp_path):
    slide = write_mrxs(tmp_path)
    shutil.rmtree(tmp_path / "slide")
    with pytest.raises(ConversionError, match=r"MIRAX slide slide\.mrxs has no data folder slide/"):
        read(slide, ConvertOptions())
    empty_folder = tmp_path / "nothing-here"
    empty_folder.mkdir()
    with pytest.raises(ConversionError, match=r"does not hold exactly one \.mrxs file"):
        read(empty_folder, ConvertOptions())


def test_transparent_region_takes_the_slide_background(tmp_path):
    # the top-right level-0 image is missing: openslide returns it transparent
    slide = write_mrxs(tmp_path, missing=[(1, 0)], fill_rgb=(250, 200, 150))
    converted = read(slide, ConvertOptions())
    assert converted.params["background"] == "#FAC896"
    assert tuple(converted.pixels[100, 400]) == (250, 200, 150)
    assert close_to(converted.pixels[100, 100], (220, 40, 40))


@pytest.mark.parametrize("fast_path_min_factor", [2, 10**9])
def test_missing_tiles_of_a_sparse_tiff_take_the_background(tmp_path, monkeypatch, fast_path_min_factor):
    monkeypatch.setattr(wsi, "FAST_PATH_MIN_FACTOR", fast_path_min_factor)
    converted = read(write_sparse_tiff(tmp_path / "sparse.tiff", empty=[5]), ConvertOptions(max_size=128))
    assert converted.params["decoder"] == ("openslide" if fast_path_min_factor > 2 else "tifffile+imagecodecs")
    assert tuple(converted.pixels[40, 40]) == (255, 255, 255)  # tile 5 = second row, second column
    assert tuple(converted.pixels[10, 10]) == (200, 50, 50)


def test_absurd_output_size_is_refused_before_reading(tmp_path, monkeypatch):
    monkeypatch.setattr(wsi, "CANVAS_PIXEL_BUDGET", 1000 * 1000)
    with pytest.raises(ConversionError, match=r"would need a 3-megapixel canvas for a 2048×1536 output"):
        read(write_pyramid_tiff(tmp_path / "p.tiff"), ConvertOptions(max_size=2048))


def test_label_slide_keeps_values_with_nearest(tmp_path):
    path = write_pyramid_tiff(tmp_path / "pyramid.tiff")
    converted = read(path, ConvertOptions(as_mask=True, max_size=700))
    assert converted.pixels.ndim == 2 and converted.params["resample"] == "nearest level pixel per output pixel"
    values = np.unique(converted.pixels)
    assert len(values) <= 3 and abs(int(values[len(values) // 2]) - LEVEL_COLOURS[2][0]) <= 12


@pytest.mark.parametrize(
    ("decoder", "fast_path_min_factor", "tiles"),
    [("tifffile+imagecodecs", 2, None), ("openslide", 10**9, 64)],
)
def test_huge_single_level_is_streamed_with_bounded_memory(tmp_path, decoder, fast_path_min_factor, tiles):
    """8192² RGBA is 256 MiB in one read_region (what get_thumbnail does); both streamed paths stay under 64 MiB."""
    path = write_single_level_tiff(tmp_path / "single.tiff", 8192)
    script = textwrap.dedent(
        f"""
        import json, resource
        from pathlib import Path
        from mmbu.build.convert import wsi
        from mmbu.build.convert.base import ConvertOptions
        wsi.FAST_PATH_MIN_FACTOR = {fast_path_min_factor}
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        converted = wsi.read(Path({str(path)!r}), ConvertOptions(max_size=1024))
        after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        p = converted.pixels
        print(json.dumps({{"growth_kib": after - before, "params": converted.params, "shape": p.shape,
                          "left": p[512, 100].tolist(), "right": p[512, 900].tolist()}}))
        """
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    report = json.loads(result.stdout)
    assert report["params"]["decoder"] == decoder and report["params"]["read"]["tiles"] == tiles
    assert report["params"]["level"] == 0 and report["params"]["read"]["reduce_factor"] == 8
    assert report["growth_kib"] < 64 * 1024, f"peak grew by {report['growth_kib'] / 1024:.0f} MiB"
    assert report["shape"] == [1024, 1024, 3]
    assert close_to(report["left"], (220, 30, 30)) and close_to(report["right"], (30, 30, 220))


def test_tifffile_and_openslide_paths_give_identical_pixels(tmp_path, monkeypatch):
    path = tmp_path / "textured.tiff"
    rng = np.random.default_rng(3)
    tifffile.imwrite(path, rng.integers(0, 256, (1000, 1300, 3), dtype=np.uint8), photometric="rgb", tile=(96, 112), compression="zlib")
    fast = read(path, ConvertOptions(max_size=300))  # factor 4, tiles not multiples of it
    monkeypatch.setattr(wsi, "FAST_PATH_MIN_FACTOR", 10**9)
    slow = read(path, ConvertOptions(max_size=300))
    assert (fast.params["decoder"], slow.params["decoder"]) == ("tifffile+imagecodecs", "openslide")
    np.testing.assert_array_equal(fast.pixels, slow.pixels)


def test_corrupt_and_unsupported_slides_are_one_sentence(tmp_path):
    with pytest.raises(ConversionError, match=r"unreadable\.svs has unreadable tiles at level 0"):
        read(FIXTURES / "unreadable.svs", ConvertOptions())
    with pytest.raises(ConversionError, match=r"unopenable\.tiff cannot be opened .*Unsupported TIFF compression"):
        read(FIXTURES / "unopenable.tiff", ConvertOptions())
    truncated = tmp_path / "truncated.tiff"
    truncated.write_bytes(write_pyramid_tiff(tmp_path / "p.tiff").read_bytes()[:3000])
    with pytest.raises(ConversionError, match="truncated.tiff") as caught:
        read(truncated, ConvertOptions())
    assert "\n" not in str(caught.value)
    text = tmp_path / "notes.svs"
    text.write_text("not a slide")
    with pytest.raises(ConversionError, match="notes.svs is not a slide format openslide can read"):
        read(text, ConvertOptions())


def test_mmbu_convert_on_slides_reports_each_and_exits_1_for_an_orphan_mrxs(tmp_path):
    inputs = tmp_path / "in"
    write_mrxs(inputs / "case")  # a folder holding one MIRAX slide
    write_ndpi(inputs / "scan.ndpi", quadrant_image(300))
    orphan = write_mrxs(tmp_path / "orphan", name="lonely")
    shutil.rmtree(tmp_path / "orphan" / "lonely")
    out = tmp_path / "out"
    sources = [inputs / "case", inputs / "scan.ndpi", orphan]
    result = CliRunner().invoke(cli, ["convert", *map(str, sources), "--out", str(out)])
    assert result.exit_code == 1, result.output
    lines = (out / "convert-report.jsonl").read_text().splitlines()
    records = {Path(record["source"]).name: record for record in map(json.loads, lines)}
    assert records["case"]["status"] == "ok" and records["case"]["params"]["vendor"] == "mirax"
    assert records["scan.ndpi"]["status"] == "ok" and records["scan.ndpi"]["params"]["vendor"] == "hamamatsu"
    assert records["lonely.mrxs"]["status"] == "error" and "lonely/" in records["lonely.mrxs"]["error"]
    mirax = np.asarray(Image.open(records["case"]["output"]))
    assert close_to(mirax[100, 400], (40, 220, 40)) and close_to(mirax[400, 100], (40, 40, 220))


def _disc_slides(tmp_path: Path, centre: tuple[float, float], radius: float = 200) -> tuple[Path, Path]:
    """A dark disc on white and its label mask (label 1 in the red channel), same 1000×700 geometry."""
    yy, xx = np.mgrid[0:700, 0:1000]
    inside = (yy - centre[0]) ** 2 + (xx - centre[1]) ** 2 <= radius**2
    image = np.full((700, 1000, 3), 255, np.uint8)
    image[inside] = (60, 20, 90)
    mask = np.zeros((700, 1000, 3), np.uint8)
    mask[inside] = 1
    paths = tmp_path / "disc.tiff", tmp_path / "disc-mask.tiff"
    for path, pixels in zip(paths, (image, mask)):
        tifffile.imwrite(path, pixels, photometric="rgb", tile=(256, 256), compression="zlib")
    return paths


@pytest.mark.parametrize("max_size", [64, 97, 150, 333])
@pytest.mark.parametrize("centre", [(330, 420), (412.3, 587.6)])
def test_mask_centroid_sits_on_the_image_blob_centroid(tmp_path, max_size, centre):
    image_path, mask_path = _disc_slides(tmp_path, centre)
    image = read(image_path, ConvertOptions(max_size=max_size)).pixels
    mask = read(mask_path, ConvertOptions(max_size=max_size, as_mask=True)).pixels
    assert mask.shape == image.shape[:2] and set(np.unique(mask)) == {0, 1}
    darkness = 255.0 - image.astype(float).mean(axis=2)
    rows, columns = np.mgrid[0 : image.shape[0], 0 : image.shape[1]]
    image_centroid = np.array([(darkness * rows).sum(), (darkness * columns).sum()]) / darkness.sum()
    mask_centroid = np.array([rows[mask == 1].mean(), columns[mask == 1].mean()])
    # keeping each block's first pixel put the mask (factor - 1) / 2 level pixels down-right: ~0.45 px here
    assert np.abs(mask_centroid - image_centroid).max() < 0.1, (mask_centroid, image_centroid)


def test_mask_equals_pillow_nearest_resize_of_the_whole_level(tmp_path):
    labels = np.random.default_rng(5).integers(0, 4, (700, 1000), dtype=np.uint8)
    tifffile.imwrite(tmp_path / "labels.tiff", np.dstack([labels] * 3), photometric="rgb", tile=(256, 256), compression="zlib")
    converted = read(tmp_path / "labels.tiff", ConvertOptions(max_size=97, as_mask=True))
    expected = np.asarray(Image.fromarray(labels).resize((97, 68), Image.Resampling.NEAREST))
    np.testing.assert_array_equal(converted.pixels, expected)
