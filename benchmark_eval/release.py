"""Read a built MMBU release directory (docs/architecture.md §3.4) without the build stack.

Layout: ``<release>/data/<config>/*.parquet``, one config per task; the columns are the contract of
:mod:`mmbu.core.release`, the table the release writer writes from. Sample tables are read with
pyarrow column projection, so the embedded PNG bytes (``image``, ``mask``) are never loaded
unless asked for; images are streamed per Parquet batch by :func:`iter_images`.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from mmbu.core.release import CONTRACT_COLUMNS, IMAGE_COLUMNS, TASKS


class ReleaseError(Exception):
    """The release directory cannot be read as documented; the message names the file and the cause."""


class MissingColumnError(ReleaseError):
    def __init__(self, path: Path, column: str) -> None:
        self.path, self.column = path, column
        super().__init__(f"{path}: column '{column}' is missing (required by the release contract, "
                         "docs/architecture.md §3.4)")


@dataclass(frozen=True)
class SampleImages:
    """The image bytes of one release row: the PNG and, for mask-grounded rows, the mask PNG."""

    sample_id: str
    image: bytes
    mask: bytes | None


def data_dir(release_dir: str | Path) -> Path:
    root = Path(release_dir)
    if not root.is_dir():
        raise ReleaseError(f"{root}: release directory does not exist")
    data = root / "data"
    if not data.is_dir():
        raise ReleaseError(f"{root}: not a release directory (no data/ folder with one sub-folder per task)")
    return data


def list_tasks(release_dir: str | Path) -> list[str]:
    """The task configs present in the release, in the canonical order of :data:`TASKS`."""
    data = data_dir(release_dir)
    present = {p.name for p in data.iterdir() if p.is_dir() and any(p.rglob("*.parquet"))}
    return [t for t in TASKS if t in present] + sorted(present - set(TASKS))


def task_files(release_dir: str | Path, task: str) -> list[Path]:
    """The Parquet shards of one task config, sorted by name (the order rows are served in)."""
    folder = data_dir(release_dir) / task
    files = sorted(folder.rglob("*.parquet")) if folder.is_dir() else []
    if not files:
        raise ReleaseError(f"{folder}: no Parquet files for task '{task}' (present: {', '.join(list_tasks(release_dir)) or 'none'})")
    return files


def _schema(path: Path) -> pa.Schema:
    try:
        return pq.read_schema(path)
    except (OSError, pa.ArrowException) as exc:
        raise ReleaseError(f"{path}: not a readable Parquet file ({exc})") from exc


def check_columns(path: Path, required: Iterable[str]) -> pa.Schema:
    """Raise :class:`MissingColumnError` for the first required column the file lacks."""
    schema = _schema(path)
    for column in required:
        if schema.get_field_index(column) < 0:
            raise MissingColumnError(path, column)
    return schema


def load_samples(release_dir: str | Path, task: str, columns: Sequence[str] | None = None,
                 optional: Sequence[str] = ()) -> pd.DataFrame:
    """All rows of one task as a DataFrame, **without image bytes** unless `columns` names them.

    With ``columns=None`` every contract column except ``image``/``mask`` is read (plus any extra
    columns such as ``answer_aliases``), and a boolean ``has_mask`` column tells which rows carry a
    mask. A file lacking a needed column raises :class:`MissingColumnError` naming file and column;
    `optional` columns are read where a file has them (null elsewhere).
    """
    frames = []
    for path in task_files(release_dir, task):
        if columns is None:
            schema = check_columns(path, CONTRACT_COLUMNS)
            wanted = [n for n in schema.names if n not in IMAGE_COLUMNS]
        else:
            schema = check_columns(path, columns)
            wanted = [*columns, *(n for n in optional if schema.get_field_index(n) >= 0 and n not in columns)]
        table = pq.read_table(path, columns=wanted)
        frame = table.to_pandas()
        if columns is None:
            mask = pq.read_table(path, columns=["mask"]).column("mask")
            frame["has_mask"] = _has_bytes(mask)
        frames.append(frame)
    result = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
    if "sample_id" in result.columns:
        duplicated = result["sample_id"][result["sample_id"].duplicated()]
        if len(duplicated):
            raise ReleaseError(f"{data_dir(release_dir) / task}: sample_id '{duplicated.iloc[0]}' occurs more than once")
    return result


def _has_bytes(column: pa.ChunkedArray) -> list[bool]:
    values = column.to_pylist()
    return [_image_bytes(v) is not None for v in values]


def _image_bytes(value: Any, base: Path | None = None) -> bytes | None:
    """Bytes of an HF ``Image`` cell (``{bytes, path}``) or of a plain binary cell."""
    if value is None:
        return None
    if isinstance(value, (bytes, bytearray)):
        return bytes(value) or None
    if isinstance(value, dict):
        if value.get("bytes"):
            return bytes(value["bytes"])
        if value.get("path") and base is not None:
            candidate = (base / value["path"]) if not Path(value["path"]).is_absolute() else Path(value["path"])
            if candidate.is_file():
                return candidate.read_bytes()
    return None


def iter_images(
    release_dir: str | Path,
    task: str,
    sample_ids: Iterable[str] | None = None,
    *,
    batch_rows: int = 64,
) -> Iterator[SampleImages]:
    """Stream ``(sample_id, image PNG, mask PNG | None)`` in file order, a Parquet batch at a time.

    Only rows whose id is in `sample_ids` (when given) are decoded into Python objects, so a
    resumed run that needs a few rows does not pay for the rest. A row without image bytes
    raises :class:`ReleaseError` naming the file and the sample.
    """
    wanted = set(sample_ids) if sample_ids is not None else None
    for path in task_files(release_dir, task):
        check_columns(path, ("sample_id", "image", "mask"))
        parquet = pq.ParquetFile(path)
        for batch in parquet.iter_batches(batch_size=batch_rows, columns=["sample_id", "image", "mask"]):
            ids = batch.column("sample_id").to_pylist()
            if wanted is not None and not wanted.intersection(ids):
                continue
            images, masks = batch.column("image"), batch.column("mask")
            for index, sample_id in enumerate(ids):
                if wanted is not None and sample_id not in wanted:
                    continue
                image = _image_bytes(images[index].as_py(), path.parent)
                if image is None:
                    raise ReleaseError(f"{path}: sample '{sample_id}' has no image bytes")
                yield SampleImages(sample_id, image, _image_bytes(masks[index].as_py(), path.parent))


def load_image(release_dir: str | Path, task: str, sample_id: str) -> tuple[bytes, bytes | None]:
    """The PNG bytes (and mask PNG bytes or None) of one sample; for a single look-up only."""
    for path in task_files(release_dir, task):
        check_columns(path, ("sample_id", "image", "mask"))
        table = pq.read_table(path, columns=["sample_id", "image", "mask"], filters=[("sample_id", "=", sample_id)])
        if table.num_rows:
            row = table.slice(0, 1).to_pylist()[0]
            image = _image_bytes(row["image"], path.parent)
            if image is None:
                raise ReleaseError(f"{path}: sample '{sample_id}' has no image bytes")
            return image, _image_bytes(row["mask"], path.parent)
    raise ReleaseError(f"{data_dir(release_dir) / task}: no sample with id '{sample_id}'")
