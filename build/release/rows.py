"""What the release writer takes: one config's rows as per-dataset rows files (`RowsFiles`, the build's rows.parquet
files), the columns they must hold, and a DataFrame written into such a file (`frame_rows_files`), so that every
release is written by one writer, `stream.write_files`."""
from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from mmbu.build.layouts.masks import mask_png
from mmbu.core.release import QUESTION_COLUMNS, RELEASE_COLUMNS

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
REQUIRED = ("sample_id", "dataset_id", "image", "answer", "options", *QUESTION_COLUMNS.values(), "license")


class ReleaseInputError(ValueError):
    """The rows handed to the release writer lack a contract column (a pipeline bug, not bad data)."""


def _absent(value: object) -> bool:
    """None/NaN/NA; containers (lists, arrays, bytes, dicts) are never 'absent', even when empty."""
    if isinstance(value, (list, tuple, dict, np.ndarray, bytes, bytearray, str, Path)):
        return False
    return value is None or value is pd.NA or value is pd.NaT or (isinstance(value, float) and math.isnan(value))


def check_columns(columns: Iterable[str]) -> None:
    absent = [c for c in REQUIRED if c not in set(columns)]
    if absent:
        raise ReleaseInputError(f"release rows lack the column(s) {', '.join(absent)}")


def group_by_task(frames: Iterable[pd.DataFrame]) -> dict[str, pd.DataFrame]:
    """Concatenate per-dataset question frames and split them by their `task` column."""
    frames = [f for f in frames if not f.empty]
    if not frames:
        return {}
    combined = pd.concat(frames, ignore_index=True)
    return {task: part.reset_index(drop=True) for task, part in combined.groupby("task", sort=True)}


@dataclass(frozen=True)
class RowsFiles:
    """One config's rows, spread over per-dataset rows Parquet files: only paths cross to the process
    that writes the config, which reads just that config's rows (so no process holds every config).
    Each part is (rows file, (image id, task) keys the cross-dataset duplicate check dropped)."""

    parts: tuple[tuple[str, frozenset[tuple[str, str]]], ...]
    task: str
    count: int = 0  # rows expected (the largest config is written first)


def _png_bytes(value: object) -> bytes | None:
    """The bytes of an image given as bytes, an HF `{bytes, path}` dict or (a mask) a boolean array; else None."""
    if isinstance(value, dict):
        value = value.get("bytes")
    if isinstance(value, np.ndarray):
        return mask_png(value.astype(bool))
    return bytes(value) if isinstance(value, (bytes, bytearray)) else None


def _png_path(value: object, folder: Path, name: str, what: str) -> str | None:
    """A rows file's `what` cell (image or mask) for one frame cell: a PNG's path as given, or the image it holds
    written as `folder/name`. An image that is no PNG is None, which the writer reports as "the image is not a PNG";
    a mask is written as given, and the writer names its file."""
    if isinstance(value, dict) and not value.get("bytes"):
        value = value.get("path")
    if isinstance(value, (str, Path)):
        return str(value)
    data = _png_bytes(value)
    if data is None or (what == "image" and not data.startswith(PNG_MAGIC)):
        return None
    path = folder / name
    path.write_bytes(data)
    return str(path)


def frame_rows_files(frame: pd.DataFrame, task: str, folder: Path) -> RowsFiles:
    """One config's rows given as a DataFrame (`image` a PNG path, bytes or `{bytes, path}`; `mask` also a boolean
    array) as a rows file in `folder`: the images given as values written beside it, every row under `task`."""
    check_columns(frame.columns)
    folder.mkdir(parents=True, exist_ok=True)
    wanted = [c for c in frame.columns if c in RELEASE_COLUMNS or c == "image_sample_id"]
    table = frame[wanted].assign(task=task).reset_index(drop=True)
    for column in ("image", "mask"):
        if column in table.columns:
            table[column] = [None if _absent(value) else _png_path(value, folder, f"{task}-{k}-{column}.png", column)
                             for k, value in enumerate(table[column])]
    path = folder / f"{task}.parquet"
    pq.write_table(pa.Table.from_pandas(table, preserve_index=False), path)
    return RowsFiles(((str(path), frozenset()),), task, len(frame))
