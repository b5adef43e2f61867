"""Which copy of a duplicated image stays: near-duplicate groups per task, one keeper each, the others dropped.

Duplicates are looked for among the images that have rows in the same task (the same image asked about in two
tasks is two different questions, e.g. a whole-image label and a boxed region). Pairs within `max_distance` on
either hash (`hashing.py`; flat images, which all hash alike, only by identical bytes), and files with identical
bytes, are linked; each connected group keeps one image:

  1. the larger image (more pixels): the source over its downsampled copies (MedMNIST, thumbnails);
  2. then the dataset listed first (manifest ids in sorted order, as the build lists them);
  3. then the smaller sample id (stable across rebuilds).

Every other image of the group loses its rows in that task, each with the keeper's id and their distance. Only one
image per group stays, so two copies with different gold answers never both stay.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from mmbu.build.duplicates.hashing import HASH_BYTES, MIN_STRUCTURE
from mmbu.build.duplicates.index import Components, LinkStats, hamming_rows, link_within
from mmbu.build.executors import RunJobs, in_this_process

# The largest distance (bits of 256) at which two images count as copies. Chosen on measurement
# (benchmarks/duplicates.py, RESULTS.md "Duplicates"): above every resized, re-encoded and re-windowed copy,
# well below the closest distinct images of one modality.
DEFAULT_MAX_DISTANCE = 24

IMAGE_COLUMNS = ("image_id", "dataset_id", "source_path", "task", "answer", "grey", "equalised", "sha256",
                 "width", "height", "structure")


@dataclass(frozen=True)
class DuplicateDrop:
    """One image's rows in one task, dropped because `keeper_id` shows the same image."""

    image_id: str
    dataset_id: str
    source_path: str
    task: str
    keeper_id: str
    keeper_dataset: str
    keeper_source: str
    distance: int  # bits of 256, the smaller of the two hashes' distances; 0 for identical files
    reason: str


@dataclass(frozen=True)
class _TaskSearch:
    """One task's search (picklable: run on a build worker while the other tasks are searched on another)."""

    grey: np.ndarray
    equalised: np.ndarray
    sha256: np.ndarray
    structured: np.ndarray
    max_distance: int


def _search_task(job: _TaskSearch) -> tuple[np.ndarray, LinkStats]:
    stats = LinkStats()
    return _components(job.grey, job.equalised, job.sha256, job.structured, job.max_distance, stats), stats


def find_duplicates(images: pd.DataFrame, max_distance: int = DEFAULT_MAX_DISTANCE,
                    stats: LinkStats | None = None, run_jobs: RunJobs = in_this_process) -> list[DuplicateDrop]:
    """The drops that leave one image per duplicate group and task.

    `images` has one row per (image, task) with the columns of `IMAGE_COLUMNS`: `grey`/`equalised` are the
    32-byte hashes, `answer` the gold answer of an ungrounded classification row (else None). `stats` gathers
    what the search did, including comparisons it skipped in pathological buckets (see `index.py`). The tasks are
    searched independently, each by one call of `run_jobs` (the build runs them on its workers: at 410 datasets
    the search was ~10 s on one core while the other waited, after the last dataset).
    """
    if images.empty:
        return []
    stats = stats if stats is not None else LinkStats()
    images = images.sort_values(["dataset_id", "image_id", "task"], kind="stable").reset_index(drop=True)
    unique = images.drop_duplicates("image_id").reset_index(drop=True)
    position = pd.Series(np.arange(len(unique)), index=unique["image_id"])
    grey = _codes(unique["grey"])
    equalised = _codes(unique["equalised"])
    structured = unique["structure"].to_numpy() >= MIN_STRUCTURE
    sha256 = unique["sha256"].to_numpy()
    rank = np.lexsort((unique["image_id"].to_numpy(), unique["dataset_id"].to_numpy(),
                       -(unique["width"].to_numpy(np.int64) * unique["height"].to_numpy(np.int64))))
    order = np.empty(len(unique), dtype=np.int64)
    order[rank] = np.arange(len(unique))  # keeper rule as one number: smaller is kept
    tasks = [(task, rows, np.sort(position[rows["image_id"]].to_numpy()))
             for task, rows in images.groupby("task", sort=True)]
    jobs = [_TaskSearch(grey[members], equalised[members], sha256[members], structured[members], max_distance)
            for _, _, members in tasks]
    # the largest task first, so that two workers finish together
    by_size = sorted(range(len(jobs)), key=lambda k: -len(jobs[k].sha256))
    found = dict(zip(by_size, run_jobs(_search_task, [jobs[k] for k in by_size])))
    drops: list[DuplicateDrop] = []
    for index, (task, rows, members) in enumerate(tasks):
        labels, searched = found[index]
        _add_stats(stats, searched)
        answers = dict(zip(rows["image_id"], rows["answer"]))
        for group in _groups(labels, members):
            keeper = min(group, key=lambda k: order[k])
            for other in group:
                if other != keeper:
                    drops.append(_drop(unique, grey, equalised, other, keeper, str(task), answers))
    return drops


def _add_stats(total: LinkStats, part: LinkStats) -> None:
    for name, value in asdict(part).items():
        combined = max if name == "largest_block" else int.__add__
        setattr(total, name, combined(getattr(total, name), value))


def _codes(column: pd.Series) -> np.ndarray:
    return np.frombuffer(b"".join(column), dtype=np.uint8).reshape(-1, HASH_BYTES)


def _components(grey: np.ndarray, equalised: np.ndarray, sha256: np.ndarray, structured: np.ndarray,
                max_distance: int, stats: LinkStats) -> np.ndarray:
    """A component label per image: identical files, and images close on either hash (both with structure)."""
    components = Components(len(sha256))
    _, first, inverse = np.unique(sha256, return_index=True, return_inverse=True)
    components.union(np.arange(len(sha256)), first[inverse.reshape(-1)])
    hashed = np.flatnonzero(structured)  # flat images all hash alike: matched by their bytes only
    if len(hashed) > 1:
        for codes in (grey, equalised):
            _, first_known, local = np.unique(components.labels()[hashed], return_index=True, return_inverse=True)
            labels = link_within(codes[hashed], max_distance, first_known[local.reshape(-1)], stats=stats)
            components.union(hashed, hashed[labels])
    return components.labels()


def _groups(labels: np.ndarray, members: np.ndarray) -> list[list[int]]:
    """Groups of more than one image (as indices into the unique images), by component label."""
    by_component: dict[int, list[int]] = {}
    for label, member in zip(labels.tolist(), members.tolist()):
        by_component.setdefault(label, []).append(member)
    return [sorted(group) for group in by_component.values() if len(group) > 1]


def _drop(unique: pd.DataFrame, grey: np.ndarray, equalised: np.ndarray, index: int, keeper: int, task: str,
          answers: dict) -> DuplicateDrop:
    row, kept = unique.iloc[index], unique.iloc[keeper]
    pair = (np.array([index]), np.array([keeper]))
    grey_distance = int(hamming_rows(grey.view(np.uint64), *pair)[0])
    equalised_distance = int(hamming_rows(equalised.view(np.uint64), *pair)[0])
    if row["sha256"] == kept["sha256"]:
        distance, what = 0, "the same file"
    else:
        distance = min(grey_distance, equalised_distance)
        hash_name = "grey" if grey_distance <= equalised_distance else "equalised"
        what = f"a near-duplicate (perceptual-hash distance {distance} of 256, {hash_name} pHash)"
    if kept["width"] * kept["height"] != row["width"] * row["height"]:
        rule = f"the larger image ({kept['width']}×{kept['height']} against {row['width']}×{row['height']})"
    elif kept["dataset_id"] != row["dataset_id"]:
        rule = "the dataset listed first"
    else:
        rule = "the first sample id"
    reason = (f"{what} of {kept['image_id']} ({kept['dataset_id']}: {kept['source_path']}) in {task}; "
              f"kept {rule}")
    mine, theirs = answers.get(row["image_id"]), answers.get(kept["image_id"])
    if isinstance(mine, str) and isinstance(theirs, str) and mine != theirs:
        reason += f"; the two copies have different gold answers ({mine!r} here, {theirs!r} kept)"
    return DuplicateDrop(image_id=row["image_id"], dataset_id=row["dataset_id"], source_path=row["source_path"],
                         task=task, keeper_id=kept["image_id"], keeper_dataset=kept["dataset_id"],
                         keeper_source=kept["source_path"], distance=distance, reason=reason)
