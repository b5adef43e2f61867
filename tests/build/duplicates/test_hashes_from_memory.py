"""The convert step hashes each image from the pixels and bytes it just wrote (`png_hashes`); the hashes must be
bit for bit those `image_hashes` reads from the PNG file, and both the definition the module states (imagehash's
pHash of the grey and equalised thumbnails, the std of the 64×64 LANCZOS thumbnail), so tables and duplicate
decisions saved under this HASH_VERSION stay valid. The module computes them its own, cheaper way (one two-band
resize, a vectorised equalize table, one DCT for both thumbnails); synthetic images written by Pillow reach each of
its branches (L and RGB, reduced and upsampled, flat, step-0 and clipped equalize tables) against the reference.

Images: H&E regions read with openslide from the demo mirror's CMU-1-Small-Region.svs (OpenSlide test data, CC0,
see manifests/mirror/PROVENANCE.md), pydicom's own CT test file `CT_small.dcm` (MIT, shipped with pydicom), and a
16-bit PNG written by Pillow from that CT; each converted by the toolkit's converter, as the build does.
"""
from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import imagehash
import numpy as np
import openslide
import pydicom
import pytest
from PIL import Image, ImageOps
from pydicom.data import get_testdata_file

from mmbu.build.convert.base import ConvertOptions
from mmbu.build.convert.batch import convert_keeping_png
from mmbu.build.duplicates.hashing import (HASH_SIZE, HASH_VERSION, THUMBNAIL, equalize_lut, hash_thumbnails,
                                           hashes_from_json, hashes_to_json, image_hashes, png_hashes)

SLIDE = Path(__file__).resolve().parents[3] / "manifests/mirror/demo_cmu1_wsi/hematoxylin_and_eosin/CMU-1-Small-Region.svs"


def he_region(x: int, y: int, width: int, height: int) -> Image.Image:
    with openslide.OpenSlide(SLIDE) as slide:
        return slide.read_region((x, y), 0, (width, height)).convert("RGB")


def sources(folder: Path) -> dict[str, Path]:
    """Source files of several kinds; the converter turns each into an 8-bit L or RGB PNG."""
    ct = get_testdata_file("CT_small.dcm")
    deep = pydicom.dcmread(ct).pixel_array.astype(np.int32)
    made = {
        "rgb_tile.png": he_region(900, 900, 300, 220),
        "rgb_large.png": he_region(200, 300, 1300, 1100),  # above THUMBNAIL: hashed after a 2× box reduce
        "grey_large.png": he_region(100, 100, 1700, 1500).convert("L"),  # 3× reduce
        "grey_tile.jpg": he_region(1200, 1500, 200, 180).convert("L"),
        "ct_16bit.png": Image.fromarray((deep - deep.min()).astype(np.uint16) * 16),  # 16-bit: windowed to 8
        "flat.png": Image.new("L", (70, 50), 128),  # every DCT coefficient but one ties with the median
        "tiny.png": he_region(1000, 1000, 5, 3),  # the thumbnail is larger than the image
    }
    paths = {}
    for name, image in made.items():
        image.save(folder / name)
        paths[name] = folder / name
    paths["ct_small.dcm"] = Path(shutil.copy(ct, folder / "ct_small.dcm"))
    return paths


def reduced_grey(path: Path) -> Image.Image:
    """The luma image the module docstring hashes: box-reduced to at most THUMBNAIL a side."""
    with Image.open(path) as image:
        factor = max(1, max(image.size) // THUMBNAIL)
        grey = image.convert("L")
    return grey.reduce(factor) if factor > 1 else grey


def reference(path: Path):
    """The hashes as the module docstring defines them, computed with imagehash on the decoded PNG."""
    grey = reduced_grey(path)
    pack = lambda h: np.packbits(h.hash.flatten()).tobytes()  # noqa: E731
    structure = float(np.asarray(grey.resize((64, 64), Image.Resampling.LANCZOS), dtype=np.float32).std())
    return (pack(imagehash.phash(grey, hash_size=HASH_SIZE)),
            pack(imagehash.phash(ImageOps.equalize(grey), hash_size=HASH_SIZE)), structure)


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    folder = tmp_path_factory.mktemp("hash-sources")
    out = {}
    for name, source in sources(folder).items():
        made = convert_keeping_png(source, folder / "png" / f"{name}.png", ConvertOptions())
        assert made.record["status"] == "ok", made.record
        out[name] = (folder / "png" / f"{name}.png", made)
    return out


def test_the_converted_pngs_cover_l_rgb_16_bit_and_reduced_images(converted):
    modes = {name: (Image.open(png).mode, Image.open(png).size) for name, (png, _) in converted.items()}
    assert modes["rgb_large.png"] == ("RGB", (1300, 1100)) and modes["grey_large.png"] == ("L", (1700, 1500))
    assert modes["ct_16bit.png"][0] == modes["ct_small.dcm"][0] == modes["grey_tile.jpg"][0] == "L"
    assert modes["rgb_tile.png"][0] == "RGB"


@pytest.mark.parametrize("name", ["rgb_tile.png", "rgb_large.png", "grey_large.png", "grey_tile.jpg",
                                  "ct_16bit.png", "ct_small.dcm", "flat.png", "tiny.png"])
def test_hashes_from_memory_are_bit_identical_to_those_read_from_the_png(converted, name):
    png, made = converted[name]
    in_memory, from_file = png_hashes(made.pixels, made.data), image_hashes(png)
    assert in_memory == from_file  # every field, the float structure included, exactly
    grey, equalised, structure = reference(png)
    assert (from_file.grey, from_file.equalised, from_file.structure) == (grey, equalised, structure)
    assert from_file.sha256 == hashlib.sha256(png.read_bytes()).hexdigest()
    assert (from_file.width, from_file.height) == Image.open(png).size
    if name not in ("flat.png", "tiny.png"):
        assert from_file.structure > 2.0  # real structure: the hashes describe the image, not noise


def test_hashes_survive_their_json_and_are_refused_under_another_version(converted):
    png, made = converted["rgb_large.png"]
    hashes = png_hashes(made.pixels, made.data)
    saved = hashes_to_json(hashes)
    assert saved["version"] == HASH_VERSION and hashes_from_json(saved) == hashes
    assert hashes_from_json(saved | {"version": "phash16-grey-v1"}) is None
    assert hashes_from_json({k: v for k, v in saved.items() if k != "grey"}) is None
    assert hashes_from_json(None) is None and hashes_from_json(saved | {"grey": "zz"}) is None


def synthetic_pixels() -> dict[str, np.ndarray]:
    """uint8 pixels, L or RGB, for each path through the hashing (each case's claim is asserted below)."""
    rng = np.random.default_rng(14)
    y, x = np.mgrid[:300, :700]
    two_levels = np.where((np.arange(90)[:, None] // 15 + np.arange(120) // 20) % 2 == 1, 40, 210)
    few_below_top = np.full(1600, 255)
    few_below_top[:200] = rng.integers(0, 255, 200)  # 200 < 255 pixels off the top level: equalize's step is 0
    top_past_255 = np.full(400, 150)
    top_past_255[:256] = rng.integers(0, 100, 256)  # step 1, so the top level's table entry is 256: clipped to 255
    every_level = rng.permutation(np.repeat(np.arange(256), 12))
    return {name: pixels.astype(np.uint8) for name, pixels in {
        "rgb_noise": rng.integers(0, 256, (112, 96, 3)),
        "grey_noise": rng.integers(0, 256, (64, 128)),
        "rgb_gradient": np.stack([x * 255 // 699, y * 255 // 299, (x + y) % 256], axis=-1),  # 700 × 300
        "grey_gradient_reduced": np.mgrid[:600, :1100][1] * 255 // 1099,  # 2× box reduce first
        "rgb_noise_reduced": rng.integers(0, 256, (1200, 1600, 3)),  # 3× box reduce first
        "grey_waves": (np.sin(x[:200, :150] / 5) * np.cos(y[:200, :150] / 9) * 100 + 128),
        "low_contrast": rng.normal(100, 3, (128, 128)).clip(0, 255),  # equalize stretches 15 levels to 256
        "flat": np.full((50, 70), 128),  # one level: equalize maps it to itself
        "two_levels": two_levels,
        "few_below_top": few_below_top.reshape(40, 40),
        "top_past_255": top_past_255.reshape(16, 25),
        "every_level": every_level.reshape(48, 64),
        "thumbnail_sized": rng.integers(0, 256, (64, 64)),  # nothing to resample
        "tiny_rgb": rng.integers(0, 256, (3, 5, 3)),  # upsampled to the thumbnail
    }.items()}


SYNTHETIC = synthetic_pixels()


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("synthetic")
    for name, pixels in SYNTHETIC.items():
        Image.fromarray(pixels).save(folder / f"{name}.png")
    return {name: folder / f"{name}.png" for name in SYNTHETIC}


def test_the_synthetic_images_reach_each_branch(written):
    tables = {name: equalize_lut(reduced_grey(png).histogram()) for name, png in written.items()}
    levels = {name: np.unique(np.asarray(reduced_grey(png))) for name, png in written.items()}
    assert tables["flat"] is None and len(levels["flat"]) == 1
    assert tables["few_below_top"] is None and len(levels["few_below_top"]) > 2  # step 0, not one level
    assert len(levels["two_levels"]) == 2 and tables["two_levels"] is not None
    assert tables["top_past_255"][150] == 256 and len(levels["every_level"]) == 256
    assert {Image.open(written[name]).mode for name in ("rgb_noise", "rgb_noise_reduced", "tiny_rgb")} == {"RGB"}
    assert {Image.open(written[name]).mode for name in ("grey_noise", "flat", "two_levels")} == {"L"}
    assert max(Image.open(written["grey_gradient_reduced"]).size) // THUMBNAIL == 2
    assert max(Image.open(written["rgb_noise_reduced"]).size) // THUMBNAIL == 3


@pytest.mark.parametrize("name", sorted(SYNTHETIC))
def test_thumbnails_and_equalize_table_are_pillows_own(written, name):
    grey = reduced_grey(written[name])
    table = equalize_lut(grey.histogram())
    equalised = ImageOps.equalize(grey)
    assert (grey if table is None else grey.point(table)).tobytes() == equalised.tobytes()
    lanczos = [np.asarray(image.resize((64, 64), Image.Resampling.LANCZOS)) for image in (grey, equalised)]
    assert np.array_equal(hash_thumbnails(grey), np.stack(lanczos))


@pytest.mark.parametrize("name", sorted(SYNTHETIC))
def test_hashes_of_synthetic_images_are_imagehashs_bit_for_bit(written, name):
    png = written[name]
    in_memory, from_file = png_hashes(SYNTHETIC[name], png.read_bytes()), image_hashes(png)
    assert in_memory == from_file
    assert (from_file.grey, from_file.equalised, from_file.structure) == reference(png)
    assert from_file.sha256 == hashlib.sha256(png.read_bytes()).hexdigest()
    assert (from_file.width, from_file.height) == Image.open(png).size
    assert (from_file.structure == 0.0) == (name == "flat")


def test_equalize_table_is_pillows_for_many_histograms():
    """Random level sets and counts, down to a few pixels: the table maps each image as ImageOps.equalize does."""
    rng = np.random.default_rng(140)
    for _ in range(300):
        levels = rng.choice(256, size=int(rng.integers(1, 40)), replace=False)
        pixels = rng.choice(levels, size=(int(rng.integers(1, 40)), int(rng.integers(1, 40))),
                            p=rng.dirichlet(np.full(len(levels), 0.3))).astype(np.uint8)
        grey = Image.fromarray(pixels)
        table = equalize_lut(grey.histogram())
        assert (grey if table is None else grey.point(table)).tobytes() == ImageOps.equalize(grey).tobytes(), pixels
