"""Perceptual hashes on real biomedical pixels and the exact Hamming range search behind the duplicate check.

Images: H&E tiles read with openslide from the demo mirror's CMU-1-Small-Region.svs (OpenSlide test data, CC0,
see manifests/mirror/PROVENANCE.md) and pydicom's own CT test file `CT_small.dcm` (MIT, shipped with pydicom).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import openslide
import pydicom
import pytest
from PIL import Image
from pydicom.data import get_testdata_file

from mmbu.build.duplicates import DEFAULT_MAX_DISTANCE, hamming, image_hashes, pairs_within
from mmbu.build.duplicates.index import probe_masks

SLIDE = Path(__file__).resolve().parents[3] / "manifests/mirror/demo_cmu1_wsi/hematoxylin_and_eosin/CMU-1-Small-Region.svs"


def he_tile(x: int, y: int, size: int = 256) -> Image.Image:
    with openslide.OpenSlide(SLIDE) as slide:
        return slide.read_region((x, y), 0, (size, size)).convert("RGB")


def save(image: Image.Image, path: Path, **options) -> Path:
    image.save(path, **options)
    return path


def windowed(pixels: np.ndarray, low: float, high: float) -> Image.Image:
    """8-bit rendering of raw CT values between two percentiles (what two converters with different windows do)."""
    lo, hi = np.percentile(pixels, [low, high])
    return Image.fromarray((np.clip((pixels - lo) / (hi - lo), 0, 1) * 255).round().astype(np.uint8))


def distance(a: Path, b: Path) -> int:
    first, second = image_hashes(a), image_hashes(b)
    return min(hamming(first.grey, second.grey), hamming(first.equalised, second.equalised))


def test_resized_and_reencoded_he_tile_is_a_near_duplicate(tmp_path):
    tile = he_tile(1024, 1024)
    original = save(tile, tmp_path / "tile.png")
    copy = save(tile.resize((128, 128), Image.LANCZOS), tmp_path / "copy.jpg", quality=75)
    assert distance(original, copy) <= DEFAULT_MAX_DISTANCE
    hashes = image_hashes(original)
    assert (hashes.width, hashes.height) == (256, 256) and len(hashes.grey) == len(hashes.equalised) == 32


def test_rewindowed_ct_is_a_near_duplicate_through_the_equalised_hash(tmp_path):
    pixels = pydicom.dcmread(get_testdata_file("CT_small.dcm")).pixel_array.astype(float)
    narrow = save(windowed(pixels, 10, 90).resize((256, 256), Image.LANCZOS), tmp_path / "narrow.png")
    wide = save(windowed(pixels, 0.5, 99.5).resize((256, 256), Image.LANCZOS), tmp_path / "wide.png")
    first, second = image_hashes(narrow), image_hashes(wide)
    assert hamming(first.equalised, second.equalised) <= DEFAULT_MAX_DISTANCE
    assert hamming(first.equalised, second.equalised) < hamming(first.grey, second.grey)


def test_distinct_he_tiles_of_one_slide_are_far_apart(tmp_path):
    # tiles of tissue (a tile of bare glass has no structure to hash: its hash is noise)
    tiles = [save(he_tile(x, y), tmp_path / f"{x}_{y}.png") for x, y in ((768, 768), (1280, 512), (1024, 1536),
                                                                       (1536, 2048), (512, 2304))]
    distances = [distance(a, b) for i, a in enumerate(tiles) for b in tiles[i + 1:]]
    assert min(distances) > 2 * DEFAULT_MAX_DISTANCE


def test_identical_files_share_their_sha256(tmp_path):
    tile = he_tile(768, 768)
    a, b = save(tile, tmp_path / "a.png"), save(tile, tmp_path / "b.png")
    assert image_hashes(a).sha256 == image_hashes(b).sha256


def test_unreadable_file_raises_a_readable_error(tmp_path):
    broken = tmp_path / "broken.png"
    broken.write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 20)
    with pytest.raises((OSError, ValueError)):
        image_hashes(broken)


def planted_codes(n: int, pairs: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    codes = rng.integers(0, 256, (n, 32), dtype=np.uint8)
    for _ in range(pairs):  # copies with 0..47 flipped bits
        a, b = rng.integers(0, n, 2)
        bits = np.unpackbits(codes[a])
        bits[rng.choice(256, rng.integers(0, 48), replace=False)] ^= 1
        codes[b] = np.packbits(bits)
    return codes


@pytest.mark.parametrize("radius", [0, 5, 15, 16, 31, 32, 40])
def test_range_search_finds_exactly_the_pairs_brute_force_finds(radius):
    codes = planted_codes(600, 120, seed=radius)
    left, right, found = pairs_within(codes, radius)
    words = codes.view(np.uint64)
    every = np.bitwise_count(words[:, None, :] ^ words[None, :, :]).sum(axis=2)
    expected_i, expected_j = np.nonzero(np.triu(every <= radius, 1))
    assert list(zip(left.tolist(), right.tolist())) == list(zip(expected_i.tolist(), expected_j.tolist()))
    assert (found == every[left, right]).all()


def test_probe_masks_and_bad_widths():
    assert len(probe_masks(0)) == 1 and len(probe_masks(1)) == 17 and len(probe_masks(2)) == 137
    with pytest.raises(ValueError, match="multiple of 8 bytes"):
        pairs_within(np.zeros((3, 12), np.uint8), 4)
    empty_i, _, _ = pairs_within(np.zeros((0, 32), np.uint8), 10)
    assert len(empty_i) == 0



def test_hamming_rows_counts_every_differing_bit_up_to_the_whole_code():
    """Distances of 0 to 256 bits (a code against its complement included), as a bit-by-bit count gives them."""
    from mmbu.build.duplicates.index import hamming_rows

    rng = np.random.default_rng(3)
    codes = rng.integers(0, 256, (40, 32), dtype=np.uint8)
    codes[1] = ~codes[0]
    left, right = rng.integers(0, 40, 500), rng.integers(0, 40, 500)
    left[:2], right[:2] = [0, 0], [1, 0]
    expected = np.unpackbits(codes[left] ^ codes[right], axis=1).sum(axis=1)
    distances = hamming_rows(codes.view(np.uint64), left, right)
    assert distances.dtype == np.int64 and distances.tolist() == expected.tolist()
    assert distances[:2].tolist() == [256, 0]
    assert hamming_rows(codes.view(np.uint64), left[:0], right[:0]).tolist() == []
