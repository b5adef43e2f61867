"""A short statistics summary of a release: counts per task, modality and sub-modality, with plots."""
from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from mmbu.core.files import atomic_path
from mmbu.core.release import TASK_SHORT_TITLES, TASK_TITLES, TASKS, Task

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

# Okabe-Ito: distinguishable with the common colour-vision deficiencies
TASK_COLOURS = {Task.UNGROUNDED: "#0072B2", Task.BOX_GROUNDED: "#E69F00", Task.MASK_GROUNDED: "#009E73",
                Task.DETECTION: "#CC79A7"}


PENDING_DIGESTS = 65_536  # image digests gathered (1 MiB) before they are merged into a modality's sorted array


@dataclass
class ReleaseCounts:
    """What the card and the statistics count of one config's written rows, aggregated as the rows are checked:
    rows per (dataset, modality, sub-modality), and per modality the distinct images.

    The distinct images are the one count that needs something per image: a 16-byte digest of each image's name
    in numpy (the names themselves cost ~100 bytes each), so memory grows by at most 16 bytes per row. Two names
    sharing a digest (odds ~n^2 / 2^129) would be counted once."""

    rows: Counter = field(default_factory=Counter)
    images: dict[str | None, np.ndarray] = field(default_factory=dict)  # modality -> sorted unique digests
    pending: dict[str | None, bytearray] = field(default_factory=dict)  # digests not yet merged into `images`

    def add(self, dataset_ids: Iterable[str], modalities: Iterable[str | None],
            sub_modalities: Iterable[str | None], images: Iterable[str]) -> None:
        """Count rows, given column by column."""
        modalities = list(modalities)
        self.rows.update(zip(dataset_ids, modalities, sub_modalities))
        for modality, image in zip(modalities, images):
            pending = self.pending.setdefault(modality, bytearray())
            pending += hashlib.blake2b(image.encode(), digest_size=16).digest()
            if len(pending) >= PENDING_DIGESTS * 16:
                self._merge(modality)

    def _merge(self, modality: str | None) -> None:
        """Pending digests into the sorted unique ones (inserted, so the peak is the array once more, not thrice)."""
        new = np.unique(np.frombuffer(self.pending.pop(modality, bytearray()), dtype="S16"))
        found = self.images.get(modality, np.empty(0, "S16"))
        at = np.searchsorted(found, new)
        new_ones = (at == len(found)) | (found[np.minimum(at, len(found) - 1)] != new) if len(found) else None
        self.images[modality] = new if new_ones is None else np.insert(found, at[new_ones], new[new_ones])

    def compact(self) -> ReleaseCounts:
        """The counts with every digest merged (before they cross to the main process)."""
        for modality in list(self.pending):
            self._merge(modality)
        return self

    @property
    def total(self) -> int:
        return sum(self.rows.values())

    def per_dataset(self) -> dict[str, int]:
        """{dataset_id: rows} by dataset id (the card's table)."""
        per: Counter = Counter()
        for (dataset_id, _, _), count in self.rows.items():
            per[dataset_id] += count
        return dict(sorted(per.items()))


def summary_table(counts_by_task: Mapping[str, ReleaseCounts]) -> pd.DataFrame:
    """Rows per task, dataset, modality and sub-modality (the base of every count): `rows` of each."""
    columns = ["dataset_id", "modality", "sub_modality", "task", "rows"]
    records = [(*key, task, count) for task, counts in counts_by_task.items() for key, count in counts.rows.items()]
    return pd.DataFrame(records, columns=columns).astype({"rows": "int64"})


def _distinct_images(counts_by_task: Mapping[str, ReleaseCounts]) -> tuple[int, dict[str | None, int]]:
    """Distinct images over every config, and per modality."""
    digests: dict[str | None, list[np.ndarray]] = {}
    for counts in counts_by_task.values():
        for modality, found in counts.compact().images.items():
            digests.setdefault(modality, []).append(found)
    per_modality = {modality: np.unique(np.concatenate(found)) for modality, found in digests.items()}
    every = np.unique(np.concatenate([*per_modality.values(), np.empty(0, "S16")]))
    return len(every), {modality: len(found) for modality, found in per_modality.items()}


def _pyplot() -> ModuleType:
    """matplotlib's pyplot on its file-only backend, imported when a plot is drawn: a build that writes no release
    (a usage error, a killed or no-op run, each pool worker) does not pay its import."""
    import matplotlib

    matplotlib.use("Agg")  # files only, never a display
    import matplotlib.pyplot as plt

    return plt


def _stacked_bars(table: pd.DataFrame, field: str, title: str, path: Path) -> None:
    counts = table.groupby([field, "task"])["rows"].sum().unstack("task", fill_value=0)
    counts = counts.loc[counts.sum(axis=1).sort_values().index]
    tasks = [t for t in TASKS if t in counts.columns]
    height = max(2.6, 0.42 * len(counts) + 1.7)
    fig, ax = _pyplot().subplots(figsize=(9, height), dpi=150)
    left = pd.Series(0, index=counts.index)
    for task in tasks:
        ax.barh(counts.index, counts[task], left=left, color=TASK_COLOURS[task], label=TASK_SHORT_TITLES[task],
                height=0.7, edgecolor="white", linewidth=0.6)
        left = left + counts[task]
    for y, total in enumerate(left):
        ax.text(total, y, f" {total:,}", va="center", ha="left", fontsize=9, color="#333333")
    ax.set_xlim(0, max(1, left.max()) * 1.15)
    _style(ax, title, "question rows", pad=24)
    # above the bars, under the title: never hides a bar whatever the counts
    ax.legend(frameon=False, fontsize=8, ncol=len(tasks), loc="lower left", bbox_to_anchor=(0, 1.0),
              handlelength=1.2, columnspacing=1.2, borderaxespad=0.2)
    _save(fig, path)


def _task_bars(table: pd.DataFrame, path: Path) -> None:
    counts = table.groupby("task")["rows"].sum().reindex([t for t in TASKS if t in set(table["task"])])
    fig, ax = _pyplot().subplots(figsize=(8.5, 2.8), dpi=150)
    labels = [TASK_TITLES[t] for t in counts.index][::-1]
    values = list(counts.values)[::-1]
    ax.barh(labels, values, color=[TASK_COLOURS[t] for t in counts.index][::-1], height=0.65)
    for y, value in enumerate(values):
        ax.text(value, y, f" {value:,}", va="center", ha="left", fontsize=9, color="#333333")
    ax.set_xlim(0, max(1, max(values, default=1)) * 1.15)
    _style(ax, "Question rows per task", "question rows")
    _save(fig, path)


def _style(ax: Axes, title: str, xlabel: str, pad: float = 6) -> None:
    ax.set_title(title, loc="left", fontsize=12, fontweight="bold", color="#222222", pad=pad)
    ax.set_xlabel(xlabel, fontsize=9, color="#555555")
    ax.tick_params(axis="both", labelsize=9, colors="#333333", length=0)
    ax.grid(axis="x", color="#e5e5e5", linewidth=0.8)
    ax.set_axisbelow(True)
    for side in ("top", "right", "left"):
        ax.spines[side].set_visible(False)
    ax.spines["bottom"].set_color("#bbbbbb")


def _save(fig: Figure, path: Path) -> None:
    fig.tight_layout()
    with atomic_path(path) as temporary:
        fig.savefig(temporary, format="png")
    _pyplot().close(fig)


def write_statistics(counts_by_task: Mapping[str, ReleaseCounts], stats_dir: Path) -> dict:
    """stats/summary.json, stats/summary.md and three plots; returns the summary dict."""
    stats_dir.mkdir(parents=True, exist_ok=True)
    table = summary_table(counts_by_task)
    images, per_modality = _distinct_images(counts_by_task)
    # each count as the pandas expression over one row per question gave it (the same Series, sorted the same way)
    images_per_modality = pd.Series({m: n for m, n in sorted(per_modality.items(), key=lambda i: str(i[0]))
                                     if m is not None and not pd.isna(m)}, dtype="int64")
    summary = {
        "rows": int(table["rows"].sum()),
        "images": images,
        "datasets": int(table["dataset_id"].nunique()),
        "images_per_modality": {k: int(v) for k, v in images_per_modality.sort_values(ascending=False).items()},
        "per_task": {k: int(v) for k, v in table.groupby("task")["rows"].sum().items()},
        "per_modality": {k: int(v) for k, v in
                         table.groupby("modality")["rows"].sum().sort_values(ascending=False).items()},
        "per_sub_modality": {k: int(v) for k, v in
                             table.groupby("sub_modality")["rows"].sum().sort_values(ascending=False).items()},
    }
    (stats_dir / "summary.json").write_text(json.dumps(summary, indent=2, ensure_ascii=False) + "\n",
                                            encoding="utf-8")
    lines = ["# Release statistics", "", f"{summary['rows']:,} question rows about {summary['images']:,} images "
             f"from {summary['datasets']} datasets.", ""]
    for key, title in (("per_task", "task"), ("per_modality", "modality"), ("per_sub_modality", "sub-modality"),
                       ("images_per_modality", "images per modality")):
        lines += [f"| {title} | rows |", "|---|---:|"]
        lines += [f"| {name} | {count:,} |" for name, count in summary[key].items()] + [""]
    (stats_dir / "summary.md").write_text("\n".join(lines), encoding="utf-8")
    if summary["rows"]:
        _task_bars(table, stats_dir / "rows_per_task.png")
        _stacked_bars(table, "modality", "Question rows per modality", stats_dir / "rows_per_modality.png")
        _stacked_bars(table, "sub_modality", "Question rows per sub-modality", stats_dir / "rows_per_sub_modality.png")
    return summary
