"""Binary codes within a Hamming radius, by multi-index hashing (Norouzi, Punjani & Fleet, CVPR 2012).

A 256-bit code is cut into 16 chunks of 16 bits. Two codes within distance r differ by at most ⌊r/16⌋ bits in at
least one chunk (pigeonhole), so each chunk's table is probed with every key within that sub-radius (17 keys for
r < 32, 137 for r < 48) and only those candidates are compared bit by bit.

Two things keep the cost near linear whatever the images:
  * the chunks take the code's bits in a fixed shuffled order. A pHash's first bits are its lowest DCT
    frequencies, nearly constant over smooth images: cut in order, one 16-bit chunk put 4,228 of 24,835 synthetic
    textures in one bucket (17 M comparisons per probe, none of them a match); any partition keeps the pigeonhole;
  * `link_within` merges what it finds into components as it goes (union-find) and only compares two codes that
    are not yet in one component; a large bucket is first joined around a few pivots, so a thousand copies of one
    empty frame cost a thousand comparisons, not half a million; a bucket whose remaining comparisons would still
    exceed `BUCKET_COMPARISONS` is skipped and counted (`LinkStats.capped_*`). Candidates are compared in blocks
    of at most `BLOCK_PAIRS`, so memory is bounded by the block, never by the pairs.

`pairs_within` lists every pair (exact; for the duplicates benchmark and tests), `link_within` gives components.
faiss's `IndexBinaryMultiHash` answers the same 78K range query 14× slower than this here, and its brute-force
index is quadratic (benchmarks/RESULTS.md, "Duplicates"); BK-trees degrade to near-linear scans per query at
this radius. Hence this short implementation.
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from itertools import combinations

import numpy as np

CHUNK_BITS = 16
BLOCK_PAIRS = 1 << 20  # candidate pairs compared at once (~100 MB of index arrays and XORed words)
BUCKET_COMPARISONS = 1 << 24  # the most one bucket may cost in one probe after pivots and components
PIVOT_BUCKET = 256  # buckets larger than this are first joined around pivots
PIVOTS = 8


@dataclass
class LinkStats:
    """What a search did: comparisons made, pairs linked, what was skipped, the largest block held."""

    comparisons: int = 0
    links: int = 0
    capped_buckets: int = 0
    capped_comparisons: int = 0  # comparisons not made: pairs reachable only through them may be missed
    largest_block: int = 0


def probe_masks(sub_radius: int) -> np.ndarray:
    """Every 16-bit XOR mask with at most `sub_radius` bits set (0 first)."""
    masks = [0]
    for bits in range(1, sub_radius + 1):
        masks += [sum(1 << b for b in chosen) for chosen in combinations(range(CHUNK_BITS), bits)]
    return np.array(masks, dtype=np.uint16)


def hamming_rows(codes: np.ndarray, left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """Hamming distances between codes[left[k]] and codes[right[k]] (codes as uint64 words).

    `np.take` and one XOR in place, then the words' counts added column by column: 3.4x faster per pair than
    fancy indexing and `sum(axis=1)` over rows of four words (21 against 71 ms per million pairs here)."""
    words = np.take(codes, left, axis=0)
    words ^= np.take(codes, right, axis=0)
    counts = np.bitwise_count(words)
    distances = counts[:, 0].astype(np.int64)
    for column in range(1, counts.shape[1]):
        distances += counts[:, column]
    return distances


def _checked(codes: np.ndarray) -> np.ndarray:
    codes = np.ascontiguousarray(codes, dtype=np.uint8)
    if codes.ndim != 2 or codes.shape[1] % 8:
        raise ValueError(f"codes of {codes.shape[-1]} bytes: the width must be a multiple of 8 bytes")
    return codes


def chunk_keys(codes: np.ndarray) -> np.ndarray:
    """(n, bits / 16) uint16 keys: the code's bits in a fixed shuffled order, cut into 16-bit chunks."""
    bits = codes.shape[1] * 8
    order = np.random.default_rng(bits).permutation(bits)  # fixed per width: the same keys in every build
    return np.ascontiguousarray(np.packbits(np.unpackbits(codes, axis=1)[:, order], axis=1)).view(np.uint16)


def _ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The concatenation of arange(s, s + l) for each start and length."""
    total = int(lengths.sum())
    offsets = np.cumsum(lengths) - lengths
    return np.repeat(starts - offsets, lengths) + np.arange(total)


class Components:
    """Union-find over n items, vectorised: `label[i]` is the smallest item of i's component."""

    def __init__(self, n: int) -> None:
        self.parent = np.arange(n, dtype=np.int64)
        self.changes = 0  # unions that joined something: tables sorted by label stay valid while unchanged

    def labels(self) -> np.ndarray:
        parent = self.parent
        while True:  # pointer jumping: log(depth) rounds
            grand = parent[parent]
            if np.array_equal(grand, parent):
                return parent
            parent = self.parent = grand

    def union(self, left: np.ndarray, right: np.ndarray) -> None:
        while len(left):
            labels = self.labels()
            a, b = labels[left], labels[right]
            apart = a != b
            if not apart.any():
                return
            a, b = a[apart], b[apart]
            high, low = np.maximum(a, b), np.minimum(a, b)
            np.minimum.at(self.parent, high, low)  # a root hooked under a smaller root; repeated until settled
            self.changes += 1
            left, right = left[apart], right[apart]


@dataclass
class _Table:
    """One chunk column's items sorted by (key, component label): each key's bucket, and within it each
    component's members, are contiguous ranges."""

    keys: np.ndarray
    labels: np.ndarray
    order: np.ndarray
    ordered: np.ndarray  # (key << 32 | label) in sorted order
    starts: np.ndarray  # first sorted position of each key
    counts: np.ndarray
    rank: np.ndarray  # each item's sorted position
    grouped: np.ndarray  # items whose component has other members (the rest are alone in their label)

    @classmethod
    def of(cls, keys: np.ndarray, labels: np.ndarray) -> _Table:
        combined = (keys.astype(np.int64) << 32) | labels
        order = np.argsort(combined, kind="stable")
        counts = np.bincount(keys, minlength=1 << CHUNK_BITS)
        rank = np.empty_like(order)
        rank[order] = np.arange(len(order))
        grouped = np.flatnonzero(np.bincount(labels, minlength=len(labels))[labels] > 1)
        return cls(keys, labels, order, combined[order], np.cumsum(counts) - counts, counts, rank, grouped)


def _probe(table: _Table, mask: int, stats: LinkStats, cap: int | None,
           block: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Candidate pairs (i < j) whose keys differ by `mask` and whose labels differ, in blocks of ≤ `block`."""
    keys, labels = table.keys, table.labels
    wanted = keys ^ np.uint16(mask)
    bucket_start = table.starts[wanted]
    bucket_end = bucket_start + table.counts[wanted]
    # where the prober's own component sits in the wanted bucket: itself alone (mask 0) or nowhere, unless
    # its component has other members, which are looked up (few, or copies already joined)
    same_start = table.rank.copy() if mask == 0 else bucket_start.copy()
    same_end = same_start + 1 if mask == 0 else same_start.copy()
    if len(table.grouped):
        grouped = table.grouped
        same = (wanted[grouped].astype(np.int64) << 32) | labels[grouped]
        same_start[grouped] = np.searchsorted(table.ordered, same, "left")
        same_end[grouped] = np.searchsorted(table.ordered, same, "right")
    before, after = same_start - bucket_start, bucket_end - same_end  # members of other components
    cost = before + after
    if cap is not None:
        per_bucket = np.bincount(keys, weights=cost, minlength=1 << CHUNK_BITS)
        over = per_bucket[keys] > cap
        if over.any():
            stats.capped_buckets += int(np.count_nonzero(per_bucket > cap))
            stats.capped_comparisons += int(cost[over].sum()) // 2  # each pair is seen from both sides
            before, after = np.where(over, 0, before), np.where(over, 0, after)
            cost = before + after
    items = np.flatnonzero(cost)
    if not len(items):
        return
    edges = np.searchsorted(np.cumsum(cost[items]), np.arange(block, int(cost.sum()), block), "right")
    for chunk in np.split(items, np.unique(edges)):
        if not len(chunk):
            continue
        left = np.concatenate([np.repeat(chunk, before[chunk]), np.repeat(chunk, after[chunk])])
        right = table.order[np.concatenate([_ranges(bucket_start[chunk], before[chunk]),
                                            _ranges(same_end[chunk], after[chunk])])]
        keep = left < right
        stats.largest_block = max(stats.largest_block, len(left))
        yield left[keep], right[keep]


def _pivot_join(keys: np.ndarray, words: np.ndarray, radius: int, components: Components,
                stats: LinkStats) -> None:
    """In every bucket larger than PIVOT_BUCKET, link each member within `radius` of one of a few pivots
    (members of components not yet joined): copies of one image then form one component at linear cost."""
    counts = np.bincount(keys, minlength=1 << CHUNK_BITS)
    for key in np.flatnonzero(counts > PIVOT_BUCKET):
        members = np.flatnonzero(keys == key)
        for _ in range(PIVOTS):
            labels = components.labels()[members]
            pivot_label = labels[0]
            rest = members[labels != pivot_label]
            if not len(rest):
                break
            pivot = rest[0]
            distances = hamming_rows(words, np.full(len(members), pivot), members)
            stats.comparisons += len(members)
            close = members[distances <= radius]
            components.union(np.full(len(close), pivot), close)
            if len(close) <= 1:
                break  # a pivot with no copies: the bucket is not one image's copies, the probes compare it


def _search(codes: np.ndarray, radius: int, components: Components | None, stats: LinkStats,
            cap: int | None, block: int) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """(i, j, distance) blocks of pairs within `radius`; with `components`, only pairs not yet linked."""
    words = codes.view(np.uint64)
    chunks = chunk_keys(codes)
    masks = probe_masks(radius // chunks.shape[1])
    own_labels = np.arange(len(codes), dtype=np.int64)  # without components every other code is a candidate
    if components is not None:  # copies of one image, joined in every column before any pair is compared
        for column in range(chunks.shape[1]):
            _pivot_join(chunks[:, column], words, radius, components, stats)
    for column in range(chunks.shape[1]):
        keys = chunks[:, column]
        table, seen = None, -1
        for mask in masks:
            if components is None:
                table = table or _Table.of(keys, own_labels)
            elif seen != components.changes:  # re-sorted only when components joined since
                table, seen = _Table.of(keys, components.labels().copy()), components.changes
            for left, right in _probe(table, int(mask), stats, cap, block):
                distances = hamming_rows(words, left, right)
                stats.comparisons += len(left)
                close = distances <= radius
                if close.any():
                    yield left[close], right[close], distances[close]


def pairs_within(codes: np.ndarray, radius: int, block: int = BLOCK_PAIRS) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(i, j, distance) for every i < j with Hamming(codes[i], codes[j]) <= radius (exact; holds every pair).

    `codes` is an (n, bytes) uint8 array; bytes must be a multiple of 8 (256-bit codes: 32 bytes).
    """
    codes = _checked(codes)
    n = len(codes)
    found = [(left.astype(np.int64) * n + right) for left, right, _ in
             _search(codes, radius, None, LinkStats(), None, block)]
    if not found:
        empty = np.empty(0, dtype=np.int64)
        return empty, empty, empty
    pair_keys = np.unique(np.concatenate(found))
    left, right = pair_keys // n, pair_keys % n
    return left, right, hamming_rows(codes.view(np.uint64), left, right)


def link_within(codes: np.ndarray, radius: int, labels: np.ndarray | None = None, *,
                bucket_comparisons: int = BUCKET_COMPARISONS, block: int = BLOCK_PAIRS,
                stats: LinkStats | None = None) -> np.ndarray:
    """Component labels (the smallest member's index) joining every two codes within `radius`, transitively.

    `labels` are components already known (identical files, the other hash), joined further here. The
    components are exact unless `stats.capped_comparisons` says some comparisons were skipped. Memory is
    bounded by `block` candidate pairs whatever the codes; identical codes are searched once.
    """
    codes = _checked(codes)
    stats = stats if stats is not None else LinkStats()
    n = len(codes)
    components = Components(n)
    if labels is not None:
        components.union(np.arange(n), np.asarray(labels, dtype=np.int64))
    if n < 2:
        return components.labels().copy()
    distinct, first, inverse = np.unique(codes, axis=0, return_index=True, return_inverse=True)
    distinct = np.ascontiguousarray(distinct)
    inverse = inverse.reshape(-1)
    components.union(np.arange(n), first[inverse])  # identical codes: one component, one searched code
    if len(distinct) > 1:
        # search the distinct codes with their own union-find seeded from the labels so far, then carry it back
        seeded = Components(len(distinct))
        representative = first  # distinct code k stands for item first[k]
        _, first_known, group = np.unique(components.labels()[representative], return_index=True,
                                          return_inverse=True)
        seeded.union(np.arange(len(distinct)), first_known[group.reshape(-1)])
        for left, right, _ in _search(distinct, radius, seeded, stats, bucket_comparisons, block):
            stats.links += len(left)
            seeded.union(left, right)
        components.union(representative, representative[seeded.labels()])  # with the pivots' joins
    return components.labels().copy()

