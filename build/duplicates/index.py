"""All pairs of binary codes within a Hamming radius, by multi-index hashing (Norouzi, Punjani & Fleet, CVPR 2012).

A 256-bit code is cut into 16 chunks of 16 bits. Two codes within distance r differ by at most ⌊r/16⌋ bits in at
least one chunk (pigeonhole), so each chunk's table is probed with every key within that sub-radius (17 keys for
r < 32, 137 for r < 48) and only those candidates are compared bit by bit. Each probe is one vectorised
lookup of every item's key in a 65,536-entry bucket table, so the cost grows with n and the candidates, not with n²
(78K images: benchmarks/RESULTS.md). The result is exact: the same pairs as comparing every pair.

faiss's `IndexBinaryMultiHash` answers the same 78K range query 14× slower than this here, and its brute-force
index is quadratic (benchmarks/RESULTS.md, "Duplicates"); BK-trees degrade to near-linear scans per query at
this radius. Hence this short, exact implementation.
"""
from __future__ import annotations

from itertools import combinations

import numpy as np

CHUNK_BITS = 16


def probe_masks(sub_radius: int) -> np.ndarray:
    """Every 16-bit XOR mask with at most `sub_radius` bits set (0 first)."""
    masks = [0]
    for bits in range(1, sub_radius + 1):
        masks += [sum(1 << b for b in chosen) for chosen in combinations(range(CHUNK_BITS), bits)]
    return np.array(masks, dtype=np.uint16)


def hamming_rows(codes: np.ndarray, left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """Hamming distances between codes[left[k]] and codes[right[k]] (codes as uint64 words)."""
    return np.bitwise_count(codes[left] ^ codes[right]).sum(axis=1, dtype=np.int64)


def pairs_within(codes: np.ndarray, radius: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(i, j, distance) for every i < j with Hamming(codes[i], codes[j]) <= radius.

    `codes` is an (n, bytes) uint8 array; bytes must be a multiple of 8 (256-bit codes: 32 bytes).
    """
    codes = np.ascontiguousarray(codes, dtype=np.uint8)
    n, width = codes.shape
    if width % 8:
        raise ValueError(f"codes of {width} bytes: the width must be a multiple of 8 bytes")
    words = codes.view(np.uint64)
    chunks = codes.view(np.uint16)  # (n, width / 2): the chunk order does not matter, only the partition
    masks = probe_masks(radius // chunks.shape[1])
    found_i, found_j = [], []
    everyone = np.arange(n)
    for column in range(chunks.shape[1]):
        keys = chunks[:, column]
        order = np.argsort(keys, kind="stable")  # items grouped by key; a key's group starts at starts[key]
        counts = np.bincount(keys, minlength=1 << CHUNK_BITS)
        starts = np.cumsum(counts) - counts
        for mask in masks:
            wanted = keys ^ mask
            count = counts[wanted]
            total = int(count.sum())
            if not total:
                continue
            left = np.repeat(everyone, count)
            right = order[np.repeat(starts[wanted] - (np.cumsum(count) - count), count) + np.arange(total)]
            keep = left < right
            left, right = left[keep], right[keep]
            close = hamming_rows(words, left, right) <= radius
            found_i.append(left[close])
            found_j.append(right[close])
    if not found_i:
        empty = np.empty(0, dtype=np.int64)
        return empty, empty, empty
    pair_keys = np.unique(np.concatenate(found_i).astype(np.int64) * n + np.concatenate(found_j))
    left, right = pair_keys // n, pair_keys % n
    return left, right, hamming_rows(words, left, right)
