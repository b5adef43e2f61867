"""One dataset's images with their hashes, one row per (image, task): what the duplicate step compares.

Made by each dataset's worker after its rows (`hashes` step of `mmbu.build.steps`), saved as
`work/<id>/image-hashes.parquet`. An image whose PNG is unchanged (same size and modification time) keeps the
hashes of the previous table, so a rebuild after a manifest edit does not hash every image again; one the convert
step hashed while it still held the pixels (`work/<id>/converted-hashes.jsonl`) takes those, so the step opens only
the PNGs it has no hashes for (made by an older build, or changed since).
"""
from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq

from mmbu.build.duplicates.hashing import HASH_VERSION, ImageHashes, hashes_from_json, hashes_to_json, image_hashes
from mmbu.build.duplicates.resolve import IMAGE_COLUMNS
from mmbu.build.json_lines import LinesWriter, parse_record, read_lines
from mmbu.core.release import Task

CACHE_COLUMNS = ("png_key",)
ROWS_COLUMNS = ("sample_id", "image_sample_id", "dataset_id", "source_path", "task", "image", "answer")
CONVERTED_HASHES_FILE = "converted-hashes.jsonl"


def png_key(path: Path) -> str:
    stat = Path(path).stat()
    return f"{HASH_VERSION}:{stat.st_size}:{stat.st_mtime_ns}"


class ConvertedHashesWriter:
    """`with ConvertedHashesWriter(path) as out: out.add(hashes)`: the convert step's hashes of its PNGs, each with the
    `png_key` of the PNG they were taken from, added a chunk of samples at a time (a JSON line per PNG, the file in
    place when the block ends without an exception)."""

    def __init__(self, path: Path) -> None:
        self._lines = LinesWriter(path)

    def __enter__(self) -> ConvertedHashesWriter:
        self._lines.__enter__()
        return self

    def add(self, hashes: dict[Path, ImageHashes]) -> None:
        for png, found in hashes.items():
            self._lines.write(json.dumps({"png": str(png), "png_key": png_key(png), **hashes_to_json(found)}))

    def __exit__(self, *exc_info: Any) -> None:
        self._lines.__exit__(*exc_info)


def load_converted_hashes(path: Path) -> dict[str, tuple[ImageHashes, str]]:
    """PNG path → (hashes, png_key) as `ConvertedHashesWriter` wrote them (read a line at a time); {} when there are
    none (an older build, a torn file: the PNGs are hashed again) and without the entries of another HASH_VERSION."""
    found = {}
    try:
        for line in read_lines(path):
            entry = parse_record(line)
            hashes = hashes_from_json(entry)
            if hashes is not None and isinstance(entry.get("png_key"), str) and isinstance(entry.get("png"), str):
                found[entry["png"]] = (hashes, entry["png_key"])
    except (OSError, ValueError):
        return {}
    return found


def image_table(rows: pd.DataFrame | Iterable[pd.DataFrame], previous: pd.DataFrame | None = None,
                converted: dict[str, tuple[ImageHashes, str]] | None = None) -> pd.DataFrame:
    """The table per (image, task) of a dataset's release rows (`rows.parquet`), given whole or as batches of its rows
    in order (`rows_batches`). Hashes are taken from the `previous` table or from the convert step's
    (`load_converted_hashes`) when the PNG's key is the one they were taken with, else from the PNG. An image that
    cannot be read is left out of the check (the release writer reports it when it embeds the PNG).

    Batches are reduced to their first row per (image, task) and hashed as they come, so what is kept is the table
    being made (a row per image and task) and each image's hashes, not the rows."""
    batches = [rows] if isinstance(rows, pd.DataFrame) else rows
    known = {} if previous is None or previous.empty else {
        (row.image_id, row.png_key): row for row in previous.drop_duplicates("image_id").itertuples()}
    hashes: dict[str, tuple[ImageHashes, str] | None] = {}  # None: unreadable
    seen: set[tuple[str, str]] = set()
    parts = []
    for batch in batches:
        if batch.empty:
            continue
        image_ids = (batch["image_sample_id"].fillna(batch["sample_id"]) if "image_sample_id" in batch
                     else batch["sample_id"])
        frame = pd.DataFrame({"image_id": image_ids, "dataset_id": batch["dataset_id"],
                              "source_path": batch["source_path"], "task": batch["task"], "png": batch["image"],
                              "answer": batch["answer"].where(batch["task"] == Task.UNGROUNDED, None)})
        frame = frame.drop_duplicates(["image_id", "task"])
        first = [key not in seen for key in zip(frame["image_id"], frame["task"])]  # not in an earlier batch
        frame = frame[first]
        seen.update(zip(frame["image_id"], frame["task"]))
        for image_id, png in frame.drop_duplicates("image_id")[["image_id", "png"]].itertuples(index=False):
            if image_id not in hashes:
                hashes[image_id] = _hashes_of(image_id, png, known, converted or {})
        parts.append(frame)
    if not parts:
        return pd.DataFrame(columns=[*IMAGE_COLUMNS, *CACHE_COLUMNS])
    frame = pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0].reset_index(drop=True)
    frame = frame[[hashes[i] is not None for i in frame["image_id"]]].reset_index(drop=True)
    for column in ("grey", "equalised", "sha256", "width", "height", "structure"):
        frame[column] = [getattr(hashes[i][0], column) for i in frame["image_id"]]
    frame["png_key"] = [hashes[i][1] for i in frame["image_id"]]
    return frame[[*IMAGE_COLUMNS, *CACHE_COLUMNS]]


def rows_batches(path: Path, batch_rows: int) -> Iterator[pd.DataFrame]:
    """The columns of a dataset's `rows.parquet` that `image_table` reads, `batch_rows` rows at a time."""
    with pq.ParquetFile(path) as rows:
        for batch in rows.iter_batches(batch_size=batch_rows, columns=list(ROWS_COLUMNS)):
            yield batch.to_pandas()


def _hashes_of(image_id: str, png: str, known: dict, converted: dict[str, tuple[ImageHashes, str]]
               ) -> tuple[ImageHashes, str] | None:
    """One image's hashes and PNG key (see `image_table`); None when its PNG cannot be read."""
    try:
        key = png_key(Path(png))
    except (OSError, ValueError):
        return None
    cached = known.get((image_id, key))
    if cached is not None:
        return ImageHashes(cached.grey, cached.equalised, cached.sha256, cached.width, cached.height,
                           cached.structure), key
    fresh = converted.get(png)
    if fresh is not None and fresh[1] == key:
        return fresh[0], key
    try:
        return image_hashes(Path(png)), key
    except (OSError, ValueError):
        return None
