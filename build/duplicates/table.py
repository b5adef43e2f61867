"""One dataset's images with their hashes, one row per (image, task): what the duplicate step compares.

Made by each dataset's worker after its rows (`hashes` step of `mmbu.build.steps`), saved as
`work/<id>/image-hashes.parquet`. An image whose PNG is unchanged (same size and modification time) keeps the
hashes of the previous table, so a rebuild after a manifest edit does not hash every image again.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from mmbu.build.duplicates.hashing import HASH_VERSION, ImageHashes, image_hashes
from mmbu.build.duplicates.resolve import IMAGE_COLUMNS

CACHE_COLUMNS = ("png_key",)


def png_key(path: Path) -> str:
    stat = Path(path).stat()
    return f"{HASH_VERSION}:{stat.st_size}:{stat.st_mtime_ns}"


def image_table(rows: pd.DataFrame, previous: pd.DataFrame | None = None) -> pd.DataFrame:
    """The table per (image, task) of a dataset's release rows (`rows.parquet`). An image that cannot be read is
    left out of the check (the release writer reports it when it embeds the PNG)."""
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
            hashes[image_id] = (ImageHashes(cached.grey, cached.equalised, cached.sha256, cached.width,
                                            cached.height, cached.structure) if cached is not None
                                else image_hashes(Path(png)), key)
        except (OSError, ValueError):
            continue
    frame = frame[frame["image_id"].isin(hashes)].reset_index(drop=True)
    for column in ("grey", "equalised", "sha256", "width", "height", "structure"):
        frame[column] = [getattr(hashes[i][0], column) for i in frame["image_id"]]
    frame["png_key"] = [hashes[i][1] for i in frame["image_id"]]
    return frame[[*IMAGE_COLUMNS, *CACHE_COLUMNS]]
