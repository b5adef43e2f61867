"""The same image in two datasets (or twice in one): found by perceptual hashes, one copy kept per task.

Public face:
    image_hashes(path) -> ImageHashes             two 256-bit pHashes (grey, equalised), sha256 and size
    pairs_within(codes, radius) -> (i, j, d)       exact Hamming range pairs by multi-index hashing
    link_within(codes, radius) -> labels          the same as components, bounded in memory and work
    image_table(rows, previous) -> DataFrame       a dataset's images × tasks with their hashes
    find_duplicates(images, max_distance) -> [DuplicateDrop]   keeper rule and drops
    check_duplicates(tables, rows_paths, max_distance) -> DuplicateCheck   the release's exclusions and filter
"""
from mmbu.build.duplicates.check import DuplicateCheck, check_duplicates
from mmbu.build.duplicates.hashing import HASH_VERSION, ImageHashes, hamming, image_hashes
from mmbu.build.duplicates.index import LinkStats, link_within, pairs_within
from mmbu.build.duplicates.resolve import DEFAULT_MAX_DISTANCE, DuplicateDrop, find_duplicates
from mmbu.build.duplicates.table import image_table

__all__ = [
    "DEFAULT_MAX_DISTANCE", "HASH_VERSION", "DuplicateCheck", "DuplicateDrop", "ImageHashes", "check_duplicates",
    "LinkStats", "find_duplicates", "hamming", "image_hashes", "image_table", "link_within", "pairs_within",
]
