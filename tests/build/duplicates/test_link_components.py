"""The duplicate search on pathological inputs: thousands of copies of one image, codes that share chunks without
being close, and the memory and work that bounds them (counted, never timed).

Codes are made with numpy (a pHash is 256 bits; what matters here is how many agree on which bits); the images
behind the duplicate step's real hashes are in `test_hashes_and_index.py` and `test_duplicate_step.py`.
"""
from __future__ import annotations

import tracemalloc

import numpy as np
import pandas as pd
import pytest
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from mmbu.build.duplicates import find_duplicates
from mmbu.build.duplicates.index import LinkStats, chunk_keys, link_within

RADIUS = 24


def flipped(base: np.ndarray, count: int, most: int, rng: np.random.Generator) -> np.ndarray:
    """`count` copies of `base` with 0..`most` random bits flipped each (re-encoded, resized copies)."""
    bits = np.tile(np.unpackbits(base), (count, 1))
    for row in bits:
        row[rng.choice(256, int(rng.integers(0, most + 1)), replace=False)] ^= 1
    return np.packbits(bits, axis=1)


def brute_force_labels(codes: np.ndarray, radius: int) -> np.ndarray:
    words = codes.view(np.uint64)
    close = np.bitwise_count(words[:, None, :] ^ words[None, :, :]).sum(axis=2) <= radius
    _, component = connected_components(coo_matrix(close), directed=False)
    return component


def same_partition(a: np.ndarray, b: np.ndarray) -> bool:
    return len(set(zip(a.tolist(), b.tolist()))) == len(set(a.tolist())) == len(set(b.tolist()))


def pathological_codes(rng: np.random.Generator) -> np.ndarray:
    """1,500 near-copies of one frame, 400 identical codes, 300 far-apart codes agreeing on their smooth low
    frequencies, chains of copies and random codes."""
    frame = rng.integers(0, 256, 32, dtype=np.uint8)
    smooth = rng.integers(0, 256, (300, 32), dtype=np.uint8)
    smooth[:, :4] = frame[:4]  # the low-frequency bytes every smooth image shares
    chain = [rng.integers(0, 256, 32, dtype=np.uint8)]
    for _ in range(30):  # each 20 bits from the previous: one component, though its ends are far apart
        chain.append(flipped(chain[-1], 1, 20, rng)[0])
    return np.concatenate([flipped(frame, 1500, 10, rng), np.tile(rng.integers(0, 256, 32, dtype=np.uint8), (400, 1)),
                           smooth, np.array(chain), rng.integers(0, 256, (800, 32), dtype=np.uint8)])


def test_components_on_a_pathological_corpus_are_those_of_every_pair_compared():
    codes = pathological_codes(np.random.default_rng(3))
    stats = LinkStats()
    labels = link_within(codes, RADIUS, stats=stats)
    assert same_partition(labels, brute_force_labels(codes, RADIUS))
    assert stats.capped_comparisons == 0
    # the near-copies and identical codes are joined around pivots and not compared pair by pair again
    every_pair = len(codes) * (len(codes) - 1) // 2
    assert stats.comparisons < every_pair / 100, (stats.comparisons, every_pair)


@pytest.mark.parametrize("radius", [0, 7, 16, 24, 40])
def test_components_match_brute_force_on_planted_pairs(radius):
    rng = np.random.default_rng(radius)
    codes = rng.integers(0, 256, (700, 32), dtype=np.uint8)
    for _ in range(150):
        a, b = rng.integers(0, len(codes), 2)
        codes[b] = flipped(codes[a], 1, 48, rng)[0]
    known = np.arange(len(codes))
    known[5], known[600] = 600, 600  # joined beforehand (identical files): stays joined
    labels = link_within(codes, radius, known)
    expected = brute_force_labels(codes, radius)
    expected[expected == expected[600]] = expected[5]
    assert same_partition(labels, expected)


def test_memory_is_bounded_by_the_block_not_by_the_copies():
    """20,000 near-copies of one empty frame: 200 M pairs within the radius, never held."""
    rng = np.random.default_rng(11)
    frame = rng.integers(0, 256, 32, dtype=np.uint8)
    codes = np.concatenate([flipped(frame, 20_000, 6, rng), rng.integers(0, 256, (5_000, 32), dtype=np.uint8)])
    stats = LinkStats()
    tracemalloc.start()
    try:
        labels = link_within(codes, RADIUS, stats=stats, block=1 << 14)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(set(labels[:20_000].tolist())) == 1 and len(set(labels.tolist())) == 5_001
    assert stats.largest_block <= (1 << 14) + len(codes)
    assert peak < 48 * 2**20, peak  # the codes' chunk tables and per-code arrays; 200 M pairs would be GiB


def test_a_bucket_over_its_cost_is_skipped_and_reported_and_copies_are_still_found():
    """Codes that agree on one chunk's bits but nowhere else: that bucket is all cost and no match."""
    rng = np.random.default_rng(5)
    codes = rng.integers(0, 256, (2_000, 32), dtype=np.uint8)
    bits = np.unpackbits(codes, axis=1)
    order = np.random.default_rng(256).permutation(256)  # the chunking order of chunk_keys
    bits[:, order[:16]] = 1  # same first chunk for every code
    codes = np.packbits(bits, axis=1)
    codes[1999] = flipped(codes[7], 1, 3, rng)[0]  # one real copy, close on every other chunk too
    assert np.bincount(chunk_keys(codes)[:, 0]).max() == 2_000
    stats = LinkStats()
    labels = link_within(codes, RADIUS, stats=stats, bucket_comparisons=100_000)
    assert stats.capped_buckets >= 1 and stats.capped_comparisons > 1_000_000
    assert labels[1999] == labels[7] and len(set(labels.tolist())) == 1_999


def test_thousands_of_blank_tiles_and_copies_in_the_duplicate_step():
    """A slide's blank tiles (flat: identical bytes only) and a frame repeated 2,000 times across two datasets:
    one keeper each, the rest dropped with the keeper's id; the distinct flat tiles all stay."""
    rng = np.random.default_rng(8)
    frame = rng.integers(0, 256, 32, dtype=np.uint8)
    flat_code = np.zeros(32, np.uint8)  # every flat image hashes alike, whatever its level
    rows = []
    for index, code in enumerate(flipped(frame, 2_000, 8, rng)):
        rows.append({"image_id": f"{'a' if index < 1000 else 'b'}-{index:05d}", "dataset_id": "a" if index < 1000 else "b",
                     "grey": code.tobytes(), "equalised": code.tobytes(), "sha256": f"frame{index}", "structure": 30.0})
    for index in range(1_500):  # 1,000 copies of one blank tile and 500 blank tiles of other levels
        rows.append({"image_id": f"a-blank{index:05d}", "dataset_id": "a", "grey": flat_code.tobytes(),
                     "equalised": flat_code.tobytes(), "sha256": "blank" if index < 1000 else f"level{index}",
                     "structure": 0.5})
    images = pd.DataFrame(rows).assign(source_path="x.png", task="ungrounded_classification", answer="normal",
                                       width=64, height=64)
    stats = LinkStats()
    drops = find_duplicates(images, RADIUS, stats)
    by_keeper = pd.Series([d.keeper_id for d in drops]).value_counts()
    assert by_keeper.to_dict() == {"a-00000": 1_999, "a-blank00000": 999}
    assert stats.capped_comparisons == 0
