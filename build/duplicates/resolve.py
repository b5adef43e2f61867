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

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from mmbu.build.duplicates.hashing import HASH_BYTES, MIN_STRUCTURE
from mmbu.build.duplicates.index import hamming_rows, pairs_within

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


def find_duplicates(images: pd.DataFrame, max_distance: int = DEFAULT_MAX_DISTANCE) -> list[DuplicateDrop]:
    """The drops that leave one image per duplicate group and task.

    `images` has one row per (image, task) with the columns of `IMAGE_COLUMNS`: `grey`/`equalised` are the
    32-byte hashes, `answer` the gold answer of an ungrounded classification row (else None).
    """
    if images.empty:
        return []
    images = images.sort_values(["dataset_id", "image_id", "task"], kind="stable").reset_index(drop=True)
    unique = images.drop_duplicates("image_id").reset_index(drop=True)
    position = {image_id: index for index, image_id in enumerate(unique["image_id"])}
    grey = _codes(unique["grey"])
    equalised = _codes(unique["equalised"])
    structured = unique["structure"].to_numpy() >= MIN_STRUCTURE
    left, right = _linked_pairs(grey, equalised, unique["sha256"].to_numpy(), structured, max_distance)
    drops: list[DuplicateDrop] = []
    for task, rows in images.groupby("task", sort=True):
        members = np.array([position[i] for i in rows["image_id"]])
        in_task = np.zeros(len(unique), dtype=bool)
        in_task[members] = True
        keep = in_task[left] & in_task[right]
        if not keep.any():
            continue
        graph = coo_matrix((np.ones(int(keep.sum())), (left[keep], right[keep])), shape=(len(unique),) * 2)
        _, component = connected_components(graph, directed=False)
        answers = dict(zip(rows["image_id"], rows["answer"]))
        for group in _groups(component, members):
            keeper = min(group, key=lambda k: _keeper_rank(unique, k))
            for other in group:
                if other != keeper:
                    drops.append(_drop(unique, grey, equalised, other, keeper, str(task), answers))
    return drops


def _codes(column: pd.Series) -> np.ndarray:
    return np.frombuffer(b"".join(column), dtype=np.uint8).reshape(-1, HASH_BYTES)


def _linked_pairs(grey: np.ndarray, equalised: np.ndarray, sha256: np.ndarray, structured: np.ndarray,
                  max_distance: int) -> tuple[np.ndarray, np.ndarray]:
    """Index pairs (i < j) close on either hash (both images with structure to hash), plus identical files."""
    found = []
    for codes in (grey, equalised):
        left, right, _ = pairs_within(codes, max_distance)
        both = structured[left] & structured[right]
        found.append((left[both], right[both]))
    _, first, inverse = np.unique(sha256, return_index=True, return_inverse=True)
    same = np.flatnonzero(first[inverse] != np.arange(len(sha256)))  # later copies of an identical file
    found.append((first[inverse][same], same))
    n = len(sha256)
    keys = np.unique(np.concatenate([np.minimum(a, b).astype(np.int64) * n + np.maximum(a, b) for a, b in found]))
    return keys // n, keys % n


def _groups(component: np.ndarray, members: np.ndarray) -> list[list[int]]:
    by_component: dict[int, list[int]] = {}
    for member in members.tolist():
        by_component.setdefault(int(component[member]), []).append(member)
    return [sorted(group) for group in by_component.values() if len(group) > 1]


def _keeper_rank(unique: pd.DataFrame, index: int) -> tuple[int, str, str]:
    row = unique.iloc[index]
    return -int(row["width"]) * int(row["height"]), row["dataset_id"], row["image_id"]


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
