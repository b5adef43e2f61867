"""Turn question rows (DataFrames from the questions stage) into release records with embedded PNGs."""
from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd

from mmbu.build.layouts.masks import mask_png
from mmbu.build.layouts.sample import Exclusion
from mmbu.build.release.features import RELEASE_COLUMNS

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
REQUIRED = ("sample_id", "dataset_id", "image", "answer", "options", "question_no_context", "question_modality",
            "question_full_context", "license")


class ReleaseInputError(ValueError):
    """The rows handed to the release writer lack a contract column (a pipeline bug, not bad data)."""


def _absent(value: object) -> bool:
    """None/NaN/NA; containers (lists, arrays, bytes, dicts) are never 'absent', even when empty."""
    if isinstance(value, (list, tuple, dict, np.ndarray, bytes, bytearray, str, Path)):
        return False
    return value is None or value is pd.NA or value is pd.NaT or (isinstance(value, float) and math.isnan(value))


def png_bytes(value: object, what: str) -> bytes:
    """PNG bytes from a path, raw bytes, an HF `{bytes, path}` dict or (masks) a boolean/uint8 array."""
    if isinstance(value, dict):
        value = value.get("bytes") or value.get("path")
    if isinstance(value, np.ndarray):
        return mask_png(value.astype(bool))
    if isinstance(value, (str, Path)):
        try:
            value = Path(value).read_bytes()
        except OSError as exc:
            raise ValueError(f"the {what} file {value} cannot be read ({exc.strerror or exc})") from None
    if not isinstance(value, (bytes, bytearray)) or not bytes(value).startswith(PNG_MAGIC):
        raise ValueError(f"the {what} is not a PNG")
    return bytes(value)


def _int_boxes(boxes: object) -> list[list[int]] | None:
    if _absent(boxes):
        return None
    return [[int(round(float(v))) for v in box] for box in boxes]


def release_records(rows: pd.DataFrame) -> tuple[list[dict], list[Exclusion]]:
    """Records with `RELEASE_COLUMNS`, sorted by sample id (so shard content is rebuild-stable)."""
    absent = [c for c in REQUIRED if c not in rows.columns]
    if absent:
        raise ReleaseInputError(f"release rows lack the column(s) {', '.join(absent)}")
    records: list[dict] = []
    exclusions: list[Exclusion] = []
    for row in rows.sort_values("sample_id").to_dict(orient="records"):
        try:
            image = png_bytes(row["image"], "image")
            mask = None if _absent(row.get("mask")) else png_bytes(row["mask"], "mask")
        except ValueError as exc:
            exclusions.append(Exclusion(dataset_id=row["dataset_id"], sample_id=row["sample_id"],
                                        item=str(row.get("source_path") or row["sample_id"]), stage="release",
                                        reason=str(exc)))
            continue
        record = {column: None if _absent(row.get(column)) else row.get(column) for column in RELEASE_COLUMNS}
        image_key = row.get("image_sample_id") or row["sample_id"]
        record["image"] = {"bytes": image, "path": f"{row['dataset_id']}/{image_key}.png"}
        record["mask"] = {"bytes": mask, "path": f"{row['dataset_id']}/{row['sample_id']}_mask.png"} if mask else None
        record["boxes"] = _int_boxes(row.get("boxes"))
        record["options"] = [str(o) for o in row["options"]]
        record["answer_aliases"] = [str(a) for a in (row.get("answer_aliases") or [])]
        record["image_sha256"] = hashlib.sha256(image).hexdigest()
        for column, kind in (("image_width", int), ("image_height", int),
                             ("objective_power", float), ("microns_per_pixel", float)):
            record[column] = None if record[column] is None else kind(record[column])
        records.append(record)
    return records, exclusions


def group_by_task(frames: Iterable[pd.DataFrame]) -> dict[str, pd.DataFrame]:
    """Concatenate per-dataset question frames and split them by their `task` column."""
    frames = [f for f in frames if not f.empty]
    if not frames:
        return {}
    combined = pd.concat(frames, ignore_index=True)
    return {task: part.reset_index(drop=True) for task, part in combined.groupby("task", sort=True)}
