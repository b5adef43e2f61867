"""Prepared images kept on disk (`mmbu eval run --image-cache DIR`), for runs that would prepare them again.

A resumed run, a second run with other generation settings and every model that prepares images alike
(Qwen2.5-VL 3B/7B/32B, Lingshu and OctoMed share smart_resize; Gemma 3 and MedGemma 1 the 896-px side)
would decode, resize, outline and encode each release image once more: ~33 ms of CPU per 1024x768 row
(benchmarks/RESULTS.md). An entry is the encoded image as it was sent, keyed by everything that decides
its bytes: the release image's and mask's sha256, the boxes, the model's image limits, the source of the
preparation code and the versions of the libraries that compute the pixels. An edit of
:mod:`.images` or :mod:`..models.box_format`, or another Pillow, invalidates every entry by construction.

Entries are written whole to a temporary name and renamed (two runs may share a directory), and carry
the sha256 of their data: a damaged or truncated entry is a miss, prepared again and rewritten. Entries are
never pruned by the runner: delete the directory (or any part) at any time. The temporaries of writes a killed run
left behind are removed by the next run once a day old (younger ones may be another run's writes in progress).
"""
from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import time
from functools import cache
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from mmbu.benchmark_eval.models import box_format
from mmbu.benchmark_eval.models.registry import ModelEntry
from mmbu.benchmark_eval.tasks import images
from mmbu.benchmark_eval.tasks.images import Frames, PreparedImage
from mmbu.core.files import TEMPORARY_PATTERN, write_bytes_atomic

# Libraries whose output is in the bytes: Pillow (decode, resize, boxes), NumPy and SciPy (mask
# outline), imagecodecs (libpng, zlib).
LIBRARIES = ("pillow", "numpy", "scipy", "imagecodecs")
# A write takes milliseconds: a temporary this old belongs to a run that was killed, not to one still writing.
STALE_TEMPORARY_S = 24 * 3600


@cache
def preparation_fingerprint() -> str:
    """sha256 of the preparation code's source and of the versions of the libraries it calls."""
    digest = hashlib.sha256()
    for module in (images, box_format):
        digest.update(Path(module.__file__).read_bytes())
    for name in LIBRARIES:
        try:
            digest.update(f"{name}=={version(name)}".encode())
        except PackageNotFoundError:
            digest.update(f"{name} absent".encode())
    return digest.hexdigest()


def entry_key(entry: ModelEntry, image_sha256: str, mask_sha256: str | None,
              boxes: list[list[float]] | None) -> str:
    """The cache key of one image prepared for `entry`: its image limits and its resize rule (Qwen3-VL has
    Qwen2.5-VL's max_pixels but not its smart_resize) matter, not its name."""
    payload = {"code": preparation_fingerprint(), "limits": entry.image.model_dump(mode="json"),
               "resize": entry.box_format.model_dump(mode="json")["resize"],
               "image": image_sha256, "mask": mask_sha256, "boxes": boxes}
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


class ImageCache:
    """A directory of prepared images; `get` and `put` are called from worker threads."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.hits = self.misses = self.stored = self.write_failures = 0

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.bin"

    def get(self, key: str, frames: Frames | None = None) -> PreparedImage | None:
        """The stored image, or None when absent, damaged (its data no longer matches its digest) or
        planned with other `frames` than given."""
        try:
            found = _parse(self._path(key).read_bytes())
        except OSError:
            found = None
        if found is None or (frames is not None and found.frames != frames):
            self.misses += 1
            return None
        self.hits += 1
        return found

    def put(self, key: str, prepared: PreparedImage) -> None:
        """Store `prepared` atomically; a failed write (full disk, read-only directory) only costs the cache."""
        frames = prepared.frames
        header = {"mime": prepared.mime, "sha256": prepared.sha256,
                  "image_size": frames.image_size, "content_size": frames.content_size,
                  "sent_size": frames.sent_size, "content_offset": frames.content_offset}
        try:
            # not durable: an entry lost to a power cut fails its digest and is only a miss
            write_bytes_atomic(self._path(key), json.dumps(header).encode() + b"\n" + prepared.data, durable=False)
            self.stored += 1
        except OSError:
            self.write_failures += 1


def _parse(raw: bytes) -> PreparedImage | None:
    head, newline, data = raw.partition(b"\n")
    if not newline:
        return None
    try:
        header: dict[str, Any] = json.loads(head)
        if hashlib.sha256(data).hexdigest() != header["sha256"]:
            return None
        frames = Frames(tuple(header["image_size"]), tuple(header["content_size"]), tuple(header["sent_size"]),
                        tuple(header["content_offset"]))
        return PreparedImage(data, header["mime"], frames)
    except (ValueError, KeyError, TypeError):
        return None


def prepare_cached(cache: ImageCache | None, png: bytes, entry: ModelEntry, *, image_sha256: str,
                   mask_sha256: str | None, boxes: list[list[float]] | None = None, mask_png: bytes | None = None,
                   frames: Frames | None = None) -> PreparedImage:
    """:func:`~.images.prepare_image`, through `cache` when one is given (images sent unchanged are not stored).

    `frames`, the sizes planned for this image and model, must match a stored entry's: a second check,
    beside the key, that the entry was prepared under the same plan.
    """
    if cache is None:
        return images.prepare_image(png, entry, boxes=boxes, mask_png=mask_png)
    key = entry_key(entry, image_sha256, mask_sha256, boxes)
    found = cache.get(key, frames)
    if found is not None:
        return found
    prepared = images.prepare_image(png, entry, boxes=boxes, mask_png=mask_png)
    if prepared.data is not png:
        cache.put(key, prepared)
    return prepared


def remove_stale_temporaries(root: str | Path, older_than_s: float = STALE_TEMPORARY_S) -> int:
    """Remove the temporaries (`.<key>.bin.<random>.tmp`) left by writes of killed runs, once `older_than_s`
    old; returns how many. Entries themselves are never touched."""
    cutoff, removed = time.time() - older_than_s, 0
    try:
        folders = [entry for entry in os.scandir(root) if entry.is_dir(follow_symlinks=False)]
    except OSError:
        return 0
    for folder in folders:
        for entry in os.scandir(folder.path):
            if not fnmatch.fnmatchcase(entry.name, TEMPORARY_PATTERN):
                continue
            try:
                if entry.stat(follow_symlinks=False).st_mtime < cutoff:
                    os.unlink(entry.path)
                    removed += 1
            except FileNotFoundError:  # renamed or removed by its writer or another run meanwhile
                continue
    return removed
