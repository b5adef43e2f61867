"""A short statistics summary of a release: counts per task, modality and sub-modality, with plots."""
from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, never a display
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from mmbu.core.files import atomic_path  # noqa: E402
from mmbu.core.release import TASK_SHORT_TITLES, TASK_TITLES, TASKS  # noqa: E402

# Okabe-Ito: distinguishable with the common colour-vision deficiencies
TASK_COLOURS = {"ungrounded_classification": "#0072B2", "box_grounded_classification": "#E69F00",
                "mask_grounded_classification": "#009E73", "object_detection": "#CC79A7"}


def summary_table(rows_by_task: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """One row per question row: task, dataset, modality, sub-modality, image (the base of every count)."""
    columns = ["dataset_id", "modality", "sub_modality", "image"]
    parts = [frame[columns].assign(task=task) for task, frame in rows_by_task.items() if not frame.empty]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=[*columns, "task"])


def _stacked_bars(table: pd.DataFrame, field: str, title: str, path: Path) -> None:
    counts = table.groupby([field, "task"]).size().unstack("task", fill_value=0)
    counts = counts.loc[counts.sum(axis=1).sort_values().index]
    tasks = [t for t in TASKS if t in counts.columns]
    height = max(2.6, 0.42 * len(counts) + 1.7)
    fig, ax = plt.subplots(figsize=(9, height), dpi=150)
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
    counts = table.groupby("task").size().reindex([t for t in TASKS if t in set(table["task"])])
    fig, ax = plt.subplots(figsize=(8.5, 2.8), dpi=150)
    labels = [TASK_TITLES[t] for t in counts.index][::-1]
    values = list(counts.values)[::-1]
    ax.barh(labels, values, color=[TASK_COLOURS[t] for t in counts.index][::-1], height=0.65)
    for y, value in enumerate(values):
        ax.text(value, y, f" {value:,}", va="center", ha="left", fontsize=9, color="#333333")
    ax.set_xlim(0, max(1, max(values, default=1)) * 1.15)
    _style(ax, "Question rows per task", "question rows")
    _save(fig, path)


def _style(ax: plt.Axes, title: str, xlabel: str, pad: float = 6) -> None:
    ax.set_title(title, loc="left", fontsize=12, fontweight="bold", color="#222222", pad=pad)
    ax.set_xlabel(xlabel, fontsize=9, color="#555555")
    ax.tick_params(axis="both", labelsize=9, colors="#333333", length=0)
    ax.grid(axis="x", color="#e5e5e5", linewidth=0.8)
    ax.set_axisbelow(True)
    for side in ("top", "right", "left"):
        ax.spines[side].set_visible(False)
    ax.spines["bottom"].set_color("#bbbbbb")


def _save(fig: plt.Figure, path: Path) -> None:
    fig.tight_layout()
    with atomic_path(path) as temporary:
        fig.savefig(temporary, format="png")
    plt.close(fig)


def write_statistics(rows_by_task: Mapping[str, pd.DataFrame], stats_dir: Path) -> dict:
    """stats/summary.json, stats/summary.md and three plots; returns the summary dict."""
    stats_dir.mkdir(parents=True, exist_ok=True)
    table = summary_table(rows_by_task)
    summary = {
        "rows": int(len(table)),
        "images": int(table["image"].nunique()),
        "datasets": int(table["dataset_id"].nunique()),
        "images_per_modality": {k: int(v) for k, v in
                                table.groupby("modality")["image"].nunique().sort_values(ascending=False).items()},
        "per_task": {k: int(v) for k, v in table.groupby("task").size().items()},
        "per_modality": {k: int(v) for k, v in table.groupby("modality").size().sort_values(ascending=False).items()},
        "per_sub_modality": {k: int(v) for k, v in
                             table.groupby("sub_modality").size().sort_values(ascending=False).items()},
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
    if len(table):
        _task_bars(table, stats_dir / "rows_per_task.png")
        _stacked_bars(table, "modality", "Question rows per modality", stats_dir / "rows_per_modality.png")
        _stacked_bars(table, "sub_modality", "Question rows per sub-modality", stats_dir / "rows_per_sub_modality.png")
    return summary
