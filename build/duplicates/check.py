"""The duplicate step of a build: every built dataset's image table → drops → exclusions and a row filter.

Runs in the build's main process once all datasets are processed (it compares across datasets). Every release
row of a dropped image in that task becomes an exclusion (stage `duplicates`) naming the kept copy and the
distance; `keep_rows` removes those rows while the release is written.
"""
from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pandas as pd

from mmbu.build.cache import hash_file, hash_json
from mmbu.build.duplicates.hashing import HASH_VERSION
from mmbu.build.duplicates.index import LinkStats
from mmbu.build.duplicates.resolve import DuplicateDrop, find_duplicates
from mmbu.build.executors import RunJobs, in_this_process
from mmbu.core.exclusions import Exclusion
from mmbu.core.files import write_json_atomic

HASHES_FILE = "image-hashes.parquet"  # in work/<id>/, written by the dataset's `hashes` step
CHECK_VERSION = 2  # part of the saved check's key: bump when the search or the keeper rule changes


@dataclass
class DuplicateCheck:
    drops: list[DuplicateDrop] = field(default_factory=list)
    exclusions: list[Exclusion] = field(default_factory=list)
    images_checked: int = 0
    search: LinkStats = field(default_factory=LinkStats)  # comparisons made and any skipped (capped buckets)

    def dropped_keys(self, dataset_id: str) -> set[tuple[str, str]]:
        """(image id, task) pairs whose rows leave this dataset's part of the release."""
        return {(d.image_id, d.task) for d in self.drops if d.dataset_id == dataset_id}

    def decisions(self) -> list[list[str | int]]:
        """What the release depends on (part of its inputs hash)."""
        return sorted([d.dataset_id, d.image_id, d.task, d.keeper_id, d.distance] for d in self.drops)


def image_ids(rows: pd.DataFrame) -> pd.Series:
    """The image a row asks about: `image_sample_id` for grounded rows, the row's own id otherwise."""
    return rows["image_sample_id"].fillna(rows["sample_id"]) if "image_sample_id" in rows else rows["sample_id"]


def keep_rows(rows: pd.DataFrame, dropped: set[tuple[str, str]]) -> pd.DataFrame:
    if not dropped or rows.empty:
        return rows
    keys = pd.Series(list(zip(image_ids(rows), rows["task"])), index=rows.index)
    return rows[~keys.isin(dropped)]


def check_duplicates(rows_paths: dict[str, Path], max_distance: int,
                     run_jobs: RunJobs = in_this_process) -> DuplicateCheck:
    """Duplicates among the datasets whose `rows.parquet` paths are given (their image tables lie beside); each
    task's search is one job of `run_jobs` (`find_duplicates`)."""
    tables = [pd.read_parquet(Path(path).with_name(HASHES_FILE)) for path in rows_paths.values()
              if Path(path).with_name(HASHES_FILE).exists()]
    images = pd.concat(tables, ignore_index=True) if tables else pd.DataFrame()
    check = DuplicateCheck(images_checked=int(images["image_id"].nunique()) if len(images) else 0)
    check.drops = find_duplicates(images, max_distance, check.search, run_jobs)
    by_dataset: dict[str, list[DuplicateDrop]] = {}
    for drop in check.drops:
        by_dataset.setdefault(drop.dataset_id, []).append(drop)
    for dataset_id, drops in sorted(by_dataset.items()):
        rows = pd.read_parquet(rows_paths[dataset_id], columns=["sample_id", "image_sample_id", "task"])
        rows["image_id"] = image_ids(rows)
        wanted = {(d.image_id, d.task): d for d in drops}
        for sample_id, image_id, task in rows[["sample_id", "image_id", "task"]].itertuples(index=False):
            drop = wanted.get((image_id, task))
            if drop is not None:
                check.exclusions.append(Exclusion(
                    dataset_id=dataset_id, sample_id=sample_id, item=drop.source_path, stage="duplicates",
                    reason=drop.reason, duplicate_of=drop.keeper_id, distance=drop.distance))
    return check


def _to_document(check: DuplicateCheck, key: str) -> dict:
    return {"key": key, "images_checked": check.images_checked, "search": asdict(check.search),
            "drops": [asdict(d) for d in check.drops], "exclusions": [e.model_dump() for e in check.exclusions]}


def _from_document(document: dict) -> DuplicateCheck:
    return DuplicateCheck(drops=[DuplicateDrop(**d) for d in document["drops"]],
                          exclusions=[Exclusion.model_validate(e) for e in document["exclusions"]],
                          images_checked=document["images_checked"], search=LinkStats(**document["search"]))


def check_duplicates_saved(rows_paths: dict[str, Path], max_distance: int, saved: Path,
                           rows_digests: Mapping[str, str], run_jobs: RunJobs = in_this_process) -> DuplicateCheck:
    """`check_duplicates`, or its result saved in `saved` when no dataset's rows or hashes changed since (a no-op
    rebuild reads one JSON file instead of every image table and search). `rows_digests`: each rows file's
    sha256 (`hash_file`), which the build also keys its release on, so the files are read once."""
    key = hash_json([CHECK_VERSION, HASH_VERSION, max_distance, sorted(
        (dataset_id, rows_digests[dataset_id], hash_file(Path(path).with_name(HASHES_FILE))
         if Path(path).with_name(HASHES_FILE).exists() else None) for dataset_id, path in rows_paths.items())])
    try:
        document = json.loads(saved.read_text(encoding="utf-8"))
        if document.get("key") == key:
            return _from_document(document)
    except (OSError, ValueError, KeyError, TypeError):
        pass  # absent or torn: checked again
    check = check_duplicates(rows_paths, max_distance, run_jobs)
    write_json_atomic(saved, _to_document(check, key))
    return check
