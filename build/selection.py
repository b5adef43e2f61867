"""The composition's selection step: which rows each task takes from a dataset, decided before anything is converted.

The layout's samples promise rows (`task_items`: an image label, an object, an (image, class) pair). Per task, the
dataset's quota (`DatasetRule.quota`: the profile's cap, raised to `min_rows_per_label` rows per label) is shared
over the labels by water-filling: every label keeps all its rows while they fit under an equal share, the labels with
more rows share what is left, and one row each of the remainder goes to labels in the seed's hash order. Inside a
label, rows are taken in a fixed order: the dataset's own test split first (`DatasetRule.test_splits`, words of the
source path or of the sample's part: an array key, a table row), then by round (an image gives `objects_per_image`
objects of one label per round), then by a hash of (seed, image id), then by a hash of (seed, row id). Only hashes of ids order
anything, never the order the layout listed samples in or a random generator's state, so the same samples and seed
give the same rows on any machine, executor and number of jobs.

A volume's objects are known only once its slice is chosen (`with_converted_mask`): until then each of its labels
counts as one row of each grounded task (a placeholder), and after conversion the rows step keeps, for each chosen
placeholder, the one object of that label whose (seed, row id) hash comes first.

Only samples with a chosen row are written to `selected.jsonl`, which the convert step reads instead of
`samples.jsonl`: what a profile does not release is never converted.
"""
from __future__ import annotations

import hashlib
import re
from array import array
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

import numpy as np
from pydantic import BaseModel, Field

from mmbu.build.json_lines import LinesWriter, chunked, read_lines
from mmbu.build.layouts import Sample
from mmbu.build.questions.items import task_items
from mmbu.build.questions.rows import TaskItem
from mmbu.core.files import write_json_atomic
from mmbu.core.release import TASKS, Task
from mmbu.curation.composition import DatasetRule
from mmbu.curation.manifest import DatasetManifest

SELECTED_FILE, SELECTION_FILE = "selected.jsonl", "selection.json"
GROUNDED_TASKS = (Task.BOX_GROUNDED, Task.MASK_GROUNDED, Task.DETECTION)
SAMPLES_PER_CHUNK = 2048
_WORD = re.compile(r"[^0-9a-z]+")


def stable_hash(seed: int, key: str) -> int:
    """A 64-bit number from (seed, key): the same everywhere, whatever the process or the platform."""
    return int.from_bytes(hashlib.sha256(f"{seed}\x1f{key}".encode("utf-8")).digest()[:8], "big")


def water_fill(available: Mapping[str, int], quota: int, seed: int) -> dict[str, int]:
    """Rows per label: each label min(its rows, level), the level as high as `quota` allows; the rows left over
    (fewer than the labels still open) go one each to open labels in the order of their (seed, label) hash."""
    if quota >= sum(available.values()):
        return dict(available)
    remaining, open_labels = quota, len(available)
    level = 0
    for count in sorted(available.values()):
        if count * open_labels > remaining:
            level = remaining // open_labels
            break
        remaining -= count
        open_labels -= 1
    shares = {label: min(count, level) for label, count in available.items()}
    left = quota - sum(shares.values())
    for label in sorted((l for l, c in available.items() if c > level), key=lambda l: stable_hash(seed, l))[:left]:
        shares[label] += 1
    return shares


def in_test_split(sample: Sample, words: Iterable[str]) -> bool:
    """Whether a word of the sample's source path or part (`test` in `CellData/OCT/test/CNV/x.jpeg`, in the array key
    `test_images`, in `ISIC2018_Task3_Test_Input/`) names a test split."""
    text = f"{sample.source_path} {sample.part or ''}".lower()
    return not set(words).isdisjoint(_WORD.split(text))


class TaskSelection(BaseModel):
    available: int = Field(description="Rows the layout's samples promise (a volume: one per label until sliced).")
    chosen: int
    test_split: int = Field(0, description="Chosen rows from the dataset's own test split.")
    labels: dict[str, list[int]] = Field(default_factory=dict, description="label -> [available, chosen].")


class Selection(BaseModel):
    """`selection.json`: the rows chosen per task (row ids), the volume placeholders chosen (image id, label) and the
    tasks taken whole."""

    rows: dict[str, list[str]] = Field(default_factory=dict)
    deferred: dict[str, list[tuple[str, str]]] = Field(default_factory=dict)
    every_row: list[str] = Field(default_factory=list)
    summary: dict[str, TaskSelection] = Field(default_factory=dict)


def _candidates(samples: list[Sample], manifest: DatasetManifest, words: tuple[str, ...]) -> Iterator[tuple]:
    """(index of the sample in `samples`, task, row id, image id, label, in the test split) for every row the samples
    promise; row id None for a placeholder: one per label and grounded task of a sample whose objects have no box yet
    (a volume)."""
    tests = [in_test_split(sample, words) for sample in samples]
    index = {sample.sample_id: k for k, sample in enumerate(samples)}
    for item in task_items(samples, manifest):
        k = index[item.sample.sample_id]
        yield k, item.task.value, item.sample_id, item.sample.sample_id, item.label, tests[k]
    tasks = {task for task in manifest.tasks if task in GROUNDED_TASKS}
    for k, sample in enumerate(samples):
        boxless = [r for r in sample.regions if r.box is None]
        for task in sorted(tasks):
            eligible = [r for r in boxless if task != Task.MASK_GROUNDED or r.mask_value is not None]
            for label in sorted({r.label for r in eligible}):
                yield k, task, None, sample.sample_id, label, tests[k]


def _key(seed: int, task: str, row_id: str | None, image_id: str, label: str) -> int:
    return stable_hash(seed, row_id if row_id is not None else f"{image_id}\x1f{task}\x1f{label}")


def _rounds(image: np.ndarray, label: np.ndarray, row: np.ndarray, per_image: int) -> np.ndarray:
    """Each row's round: its rank among the rows of its image and label (by row hash), in steps of `per_image`."""
    order = np.lexsort((row, label, image))
    new = np.ones(len(order), bool)
    new[1:] = (image[order][1:] != image[order][:-1]) | (label[order][1:] != label[order][:-1])
    positions = np.arange(len(order))
    rank = positions - np.maximum.accumulate(np.where(new, positions, 0))
    rounds = np.empty(len(order), np.int64)
    rounds[order] = rank // per_image
    return rounds


class _Candidates:
    """One task's candidate rows, a few numbers each (a dataset may promise millions of objects): label code, test
    split, image hash, row hash."""

    def __init__(self) -> None:
        self.names: dict[str, int] = {}
        self.labels, self.tests = array("q"), bytearray()
        self.images, self.rows = array("Q"), array("Q")

    def add(self, label: str, test: bool, image: int, row: int) -> None:
        self.labels.append(self.names.setdefault(label, len(self.names)))
        self.tests.append(test)
        self.images.append(image)
        self.rows.append(row)

    def counts(self) -> dict[str, int]:
        per_code = np.bincount(np.frombuffer(self.labels, np.int64), minlength=len(self.names))
        return {name: int(per_code[code]) for name, code in self.names.items()}


def choose(candidates: _Candidates, quota: int | None, rule: DatasetRule) -> tuple[np.ndarray, dict[str, int]]:
    """Which of one task's candidate rows are taken (a boolean per row), and how many per label."""
    counts = candidates.counts()
    if quota is None or quota >= len(candidates.labels):
        return np.ones(len(candidates.labels), bool), counts
    shares = water_fill(counts, quota, rule.seed)
    names = sorted(counts)  # codes in label order: nothing depends on the order labels were first met in
    recode = np.array([names.index(name) for name in candidates.names], np.int64)
    codes = recode[np.frombuffer(candidates.labels, np.int64)]
    tests = np.frombuffer(bytes(candidates.tests), np.bool_)
    images, rows = np.frombuffer(candidates.images, np.uint64), np.frombuffer(candidates.rows, np.uint64)
    rounds = _rounds(images, codes, rows, rule.objects_per_image)
    order = np.lexsort((rows, images, rounds, ~tests, codes))
    sorted_codes = codes[order]
    positions = np.arange(len(order))
    starts = np.searchsorted(sorted_codes, np.arange(len(names)))
    rank = positions - starts[sorted_codes]
    limit = np.array([shares[name] for name in names], np.int64)[sorted_codes]
    chosen = np.zeros(len(codes), bool)
    chosen[order[rank < limit]] = True
    return chosen, shares


def _samples(path: Path) -> Iterator[list[tuple[str, Sample]]]:
    lines = read_lines(path)
    for chunk in chunked(lines, SAMPLES_PER_CHUNK):
        yield [(line, Sample.model_validate_json(line)) for line in chunk]


def select_samples(samples_path: Path, manifest: DatasetManifest, rule: DatasetRule, selected_path: Path,
                   selection_path: Path) -> Selection:
    """Choose the dataset's rows under `rule`; write the samples that have a chosen row (`selected_path`, lines as in
    `samples_path`, in its order) and what was chosen (`selection_path`). Reads the samples twice, a chunk at a time:
    only a few numbers per candidate row are held in between."""
    seed, words = rule.seed, rule.test_splits
    columns: dict[str, _Candidates] = defaultdict(_Candidates)
    for chunk in _samples(samples_path):
        image_hashes = {sample.sample_id: stable_hash(seed, sample.sample_id) for _, sample in chunk}
        for _, task, row_id, image_id, label, test in _candidates([s for _, s in chunk], manifest, words):
            columns[task].add(label, test, image_hashes[image_id], _key(seed, task, row_id, image_id, label))
    selection = Selection(every_row=[t for t in TASKS if t in columns and rule.quota(t, 1) is None])
    chosen_keys: dict[str, set[int]] = {}
    for task in (t for t in TASKS if t in columns):
        column = columns.pop(task)
        counts = column.counts()
        taken, shares = choose(column, rule.quota(task, len(counts)), rule)
        tests = np.frombuffer(bytes(column.tests), np.bool_)
        selection.summary[task] = TaskSelection(
            available=len(column.labels), chosen=int(taken.sum()), test_split=int((taken & tests).sum()),
            labels={label: [counts[label], shares.get(label, 0)] for label in sorted(counts)})
        if task not in selection.every_row:
            chosen_keys[task] = set(np.frombuffer(column.rows, np.uint64)[taken].tolist())
    del columns
    rows_of: dict[str, list[str]] = defaultdict(list)
    deferred_of: dict[str, list[tuple[str, str]]] = defaultdict(list)
    every = set(selection.every_row)
    with LinesWriter(selected_path) as out:
        for chunk in _samples(samples_path):
            keep = [False] * len(chunk)
            for k, task, row_id, image_id, label, _ in _candidates([s for _, s in chunk], manifest, words):
                if task in every:
                    keep[k] = True
                elif _key(seed, task, row_id, image_id, label) in chosen_keys[task]:
                    keep[k] = True
                    if row_id is None:
                        deferred_of[task].append((image_id, label))
                    else:
                        rows_of[task].append(row_id)
            for (line, _), wanted in zip(chunk, keep):
                if wanted:
                    out.write(line.rstrip("\n"))  # as read: the newline is the writer's
    selection.rows = {task: sorted(ids) for task, ids in sorted(rows_of.items())}
    selection.deferred = {task: sorted(pairs) for task, pairs in sorted(deferred_of.items())}
    write_json_atomic(selection_path, selection.model_dump(mode="json"))
    return selection


class RowFilter:
    """The rows step's side of a selection: keeps a chunk's task rows that were chosen, and one object per chosen
    volume placeholder (the object of that image, task and label whose (seed, row id) hash comes first)."""

    def __init__(self, selection: Selection, seed: int) -> None:
        self.seed = seed
        self.every = set(selection.every_row)
        self.rows = {task: set(ids) for task, ids in selection.rows.items()}
        self.deferred = {task: {tuple(pair) for pair in pairs} for task, pairs in selection.deferred.items()}

    @classmethod
    def read(cls, path: Path, seed: int) -> RowFilter:
        return cls(Selection.model_validate_json(path.read_text(encoding="utf-8")), seed)

    def __call__(self, items: list[TaskItem]) -> list[TaskItem]:
        keep = [False] * len(items)
        placeholders: dict[tuple[str, str, str], tuple[int, int]] = {}  # group -> (hash, position) of its first row
        for position, item in enumerate(items):
            task, row_id, image_id, label = item.task.value, item.sample_id, item.sample.sample_id, item.label
            if task in self.every or row_id in self.rows.get(task, ()):
                keep[position] = True
            elif (image_id, label) in self.deferred.get(task, ()):
                rank = stable_hash(self.seed, row_id)
                group = (task, image_id, label)
                if group not in placeholders or rank < placeholders[group][0]:
                    placeholders[group] = (rank, position)
        for _, position in placeholders.values():
            keep[position] = True
        return [item for item, kept in zip(items, keep) if kept]
