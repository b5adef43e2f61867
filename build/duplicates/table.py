"""One dataset's images with their hashes, one row per (image, task): what the duplicate step compares.

Made by each dataset's worker after its rows (`hashes` step of `mmbu.build.steps`), saved as
`work/<id>/image-hashes.parquet`. An image whose PNG is unchanged (same size and modification time) keeps the
hashes of the previous table, so a rebuild after a manifest edit does not hash every image again; one the convert
step hashed while it still held the pixels (`work/<id>/converted-hashes.json`) takes those, so the step opens only
the PNGs it has no hashes for (made by an older build, or changed since).
"""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from mmbu.build.duplicates.hashing import HASH_VERSION, ImageHashes, hashes_from_json, hashes_to_json, image_hashes
from mmbu.build.duplicates.resolve import IMAGE_COLUMNS
from mmbu.core.files import write_json_atomic

CACHE_COLUMNS = ("png_key",)
CONVERTED_HASHES_FILE = "converted-hashes.json"


def png_key(path: Path) -> str:
    stat = Path(path).stat()
    return f"{HASH_VERSION}:{stat.st_size}:{stat.st_mtime_ns}"


def save_converted_hashes(path: Path, hashes: dict[Path, ImageHashes]) -> None:
    """The convert step's hashes of its PNGs, each with the `png_key` of the PNG they were taken from."""
    write_json_atomic(path, {str(png): {"png_key": png_key(png), **hashes_to_json(h)} for png, h in hashes.items()})


def load_converted_hashes(path: Path) -> dict[str, tuple[ImageHashes, str]]:
    """PNG path → (hashes, png_key) as `save_converted_hashes` wrote them; {} when there are none (an older build)
    and without the entries of another HASH_VERSION."""
    try:
        saved = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {png: (hashes, entry["png_key"]) for png, entry in saved.items()
            if (hashes := hashes_from_json(entry)) is not None and isinstance(entry.get("png_key"), str)}


def image_table(rows: pd.DataFrame, previous: pd.DataFrame | None = None,
                converted: dict[str, tuple[ImageHashes, str]] | None = None) -> pd.DataFrame:
    """The table per (image, task) of a dataset's release rows (`rows.parquet`). Hashes are taken from the
    `previous` table or from the convert step's (`load_converted_hashes`) when the PNG's key is the one they were
    taken with, else from the PNG. An image that cannot be read is left out of the check (the release writer
    reports it when it embeds the PNG)."""
    if rows.empty:
        return pd.DataFrame(columns=[*IMAGE_COLUMNS, *CACHE_COLUMNS])
    image_ids = rows["image_sample_id"].fillna(rows["sample_id"]) if "image_sample_id" in rows else rows["sample_id"]
    frame = pd.DataFrame({"image_id": image_ids, "dataset_id": rows["dataset_id"], "source_path": rows["source_path"],
                          "task": rows["task"], "png": rows["image"],
                          "answer": rows["answer"].where(rows["task"] == "ungrounded_classification", None)})
    frame = frame.drop_duplicates(["image_id", "task"]).reset_index(drop=True)
    known = {} if previous is None or previous.empty else {
        (row.image_id, row.png_key): row for row in previous.drop_duplicates("image_id").itertuples()}
    hashes: dict[str, tuple[ImageHashes, str]] = {}
    for image_id, png in frame.drop_duplicates("image_id")[["image_id", "png"]].itertuples(index=False):
        try:
            key = png_key(Path(png))
            cached = known.get((image_id, key))
            fresh = (converted or {}).get(png)
            hashes[image_id] = (ImageHashes(cached.grey, cached.equalised, cached.sha256, cached.width,
                                            cached.height, cached.structure) if cached is not None
                                else fresh[0] if fresh is not None and fresh[1] == key
                                else image_hashes(Path(png)), key)
        except (OSError, ValueError):
            continue
    frame = frame[frame["image_id"].isin(hashes)].reset_index(drop=True)
    for column in ("grey", "equalised", "sha256", "width", "height", "structure"):
        frame[column] = [getattr(hashes[i][0], column) for i in frame["image_id"]]
    frame["png_key"] = [hashes[i][1] for i in frame["image_id"]]
    return frame[[*IMAGE_COLUMNS, *CACHE_COLUMNS]]
