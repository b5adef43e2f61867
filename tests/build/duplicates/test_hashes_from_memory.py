"""The convert step hashes each image from the pixels and bytes it just wrote (`png_hashes`); the hashes must be
bit for bit those `image_hashes` reads from the PNG file, and both the definition the module states (imagehash's
pHash of the grey and equalised thumbnails, the std of the 64×64 LANCZOS thumbnail), so tables and duplicate
decisions saved under this HASH_VERSION stay valid.

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
from mmbu.build.duplicates.hashing import (HASH_SIZE, HASH_VERSION, THUMBNAIL, hashes_from_json, hashes_to_json,
                                           image_hashes, png_hashes)

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


def reference(path: Path):
    """The hashes as the module docstring defines them, computed with imagehash on the decoded PNG."""
    with Image.open(path) as image:
        factor = max(1, max(image.size) // THUMBNAIL)
        grey = image.convert("L")
    grey = grey.reduce(factor) if factor > 1 else grey
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
