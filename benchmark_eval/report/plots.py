"""PNG plots of a score report (matplotlib, Agg backend: no display needed)."""
from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from mmbu.benchmark_eval.report.tables import TEMPLATE_TITLES, random_baselines  # noqa: E402
from mmbu.benchmark_eval.scoring.results import ConfigScore, Delta, records  # noqa: E402
from mmbu.benchmark_eval.scoring.metrics import micro_f1  # noqa: E402
from mmbu.core.files import write_bytes_atomic  # noqa: E402
from mmbu.core.release import FORMS, TASK_TITLES, TASKS, TEMPLATES, Form  # noqa: E402

DPI = 120
NO_SCORE_COLOUR = "#888888"


def _save(figure: plt.Figure, path: Path) -> Path:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=DPI, bbox_inches="tight")
    plt.close(figure)
    return write_bytes_atomic(path, buffer.getvalue())


def heatmap_by_field(outcomes: pd.DataFrame, field: str, form: str, display: Callable[[str], str], path: Path,
                     min_records: int = 1) -> Path | None:
    """Model × `field` heatmap of micro-F1 for one form, pooled over tasks and templates."""
    scored = outcomes[outcomes["scored"] & (outcomes["form"] == form)]
    if scored.empty or field not in scored:
        return None
    values = scored[field].astype(object).where(scored[field].notna(), "(missing)")
    sums = scored.groupby(["model", values.rename("value")])[["tp", "fp", "fn"]].sum()
    counts = scored.groupby(["model", values.rename("value")]).size()
    f1 = pd.Series(micro_f1(sums["tp"], sums["fp"], sums["fn"]), index=sums.index)
    f1 = f1[counts >= min_records]
    table = f1.unstack("value")
    models = list(dict.fromkeys(scored["model"]))
    table = table.reindex(models)
    table = table[sorted(table.columns, key=str)]
    n = counts.unstack("value").reindex(index=table.index, columns=table.columns)
    height = 1.2 + 0.45 * len(table.index)
    width = 2.5 + 0.75 * len(table.columns)
    figure, axis = plt.subplots(figsize=(max(6.0, width), max(2.5, height)))
    data = np.ma.masked_invalid(table.to_numpy(dtype=float))
    cmap = plt.get_cmap("viridis").with_extremes(bad="#dddddd")  # grey: no records
    image = axis.imshow(data, cmap=cmap, vmin=0, vmax=1, aspect="auto")
    axis.set_xticks(range(len(table.columns)), [str(c) for c in table.columns], rotation=40, ha="right")
    axis.set_yticks(range(len(table.index)), [display(m) for m in table.index])
    for i in range(data.shape[0]):
        for j in range(data.shape[1]):
            if not data.mask[i, j]:
                value = data[i, j]
                axis.text(j, i, f"{value:.2f}\n(n={int(n.iat[i, j])})", ha="center", va="center", fontsize=7,
                          color="white" if value < 0.55 else "black")
    axis.set_title(f"Micro-F1 by {field.replace('_', '-')} ({form} answers, all tasks and templates)")
    figure.colorbar(image, ax=axis, fraction=0.04, pad=0.02, label="micro-F1")
    return _save(figure, path)


def f1_by_config(scores: list[ConfigScore], outcomes: pd.DataFrame, display: Callable[[str], str], path: Path,
                 baselines: dict[tuple[str, str], float]) -> Path | None:
    """Per task: F1 with its 95% CI for each form × template, one bar per model; dashed line = random."""
    frame = pd.DataFrame(records(scores))
    if frame.empty:
        return None
    tasks = [t for t in TASKS if t in set(frame["task"])]
    models = list(dict.fromkeys(frame["model"]))
    configs = [(form, template) for form in FORMS for template in TEMPLATES]
    figure, axes = plt.subplots(len(tasks), 1, figsize=(10, 3.1 * len(tasks)), squeeze=False, sharey=True)
    width = 0.8 / max(1, len(models))
    colors = plt.get_cmap("tab10")
    for axis, task in zip(axes[:, 0], tasks):
        for k, model in enumerate(models):
            rows = frame[(frame["task"] == task) & (frame["model"] == model)].set_index(["form", "template"])
            xs, ys, low, high = [], [], [], []
            for i, config in enumerate(configs):
                x = i - 0.4 + width * (k + 0.5)
                if config in rows.index and pd.notna(rows.loc[config, "f1"]):
                    r = rows.loc[config]
                    xs.append(x)
                    ys.append(r["f1"])
                    low.append(r["f1"] - (r["ci_low"] if pd.notna(r["ci_low"]) else r["f1"]))
                    high.append((r["ci_high"] if pd.notna(r["ci_high"]) else r["f1"]) - r["f1"])
                else:  # said in the plot, so that no score never reads as an F1 of 0
                    axis.text(x, 0.02, "no score", rotation=90, ha="center", va="bottom", fontsize=7,
                              color=NO_SCORE_COLOUR)
            # the edge keeps an F1 of exactly 0 visible as a line on the axis
            axis.bar(xs, ys, width=width * 0.9, color=colors(k % 10), edgecolor=colors(k % 10), linewidth=1.5,
                     label=display(model), yerr=[low, high], capsize=2, error_kw={"elinewidth": 0.8})
        for half, form in enumerate(FORMS):
            baseline = baselines.get((task, form))
            if baseline is not None and np.isfinite(baseline):
                start, end = half * 3 - 0.45, half * 3 + 2.45
                axis.hlines(baseline, start, end, colors="black", linestyles="dashed", linewidth=1)
                axis.text(start + 0.02, baseline, f"random {baseline:.2f}", va="bottom", ha="left", fontsize=7,
                          bbox={"facecolor": "white", "alpha": 0.8, "edgecolor": "none", "pad": 1})
        axis.axvline(2.5, color="#999999", linewidth=0.8)
        axis.set_xticks(range(len(configs)), [f"{form}\n{TEMPLATE_TITLES[t]}" for form, t in configs], fontsize=8)
        axis.set_xlim(-0.5, len(configs) - 0.5)
        axis.set_ylim(-0.02, 1.02)  # room below 0, so that a bar of 0 shows as a line above the axis
        axis.set_ylabel("micro-F1")
        axis.set_title(TASK_TITLES[task], fontsize=10)
        axis.grid(axis="y", alpha=0.3)
    axes[0, 0].legend(loc="upper right", fontsize=8, ncol=min(4, len(models)))
    figure.suptitle("Micro-F1 with 95% bootstrap intervals per configuration", y=1.0)
    figure.tight_layout()
    return _save(figure, path)


def delta_by_model(deltas: list[Delta], display: Callable[[str], str], path: Path) -> Path | None:
    """Per task: Δ = F1(closed) − F1(open) per model with its paired 95% CI, one marker per template."""
    frame = pd.DataFrame(records(deltas))
    if frame.empty:
        return None
    tasks = [t for t in TASKS if t in set(frame["task"])]
    models = list(dict.fromkeys(frame["model"]))
    figure, axes = plt.subplots(1, len(tasks), figsize=(3.6 * len(tasks) + 1.5, 0.5 * len(models) + 1.6),
                                squeeze=False, sharey=True)
    markers = {"no_context": "o", "modality": "s", "full_context": "^"}
    offsets = {"no_context": -0.2, "modality": 0.0, "full_context": 0.2}
    for axis, task in zip(axes[0], tasks):
        for template in TEMPLATES:
            rows = frame[(frame["task"] == task) & (frame["template"] == template)]
            ys = [models.index(m) + offsets[template] for m in rows["model"]]
            xs = rows["delta"].to_numpy(dtype=float)
            errors = [xs - rows["ci_low"].fillna(rows["delta"]).to_numpy(dtype=float),
                      rows["ci_high"].fillna(rows["delta"]).to_numpy(dtype=float) - xs]
            axis.errorbar(xs, ys, xerr=errors, fmt=markers[template], capsize=2, markersize=5,
                          label=TEMPLATE_TITLES[template] if task == tasks[0] else None)
        axis.axvline(0, color="black", linewidth=0.8)
        axis.set_title(TASK_TITLES[task], fontsize=10)
        axis.set_xlabel("Δ = F1 closed − F1 open")
        axis.grid(axis="x", alpha=0.3)
    axes[0, 0].set_yticks(range(len(models)), [display(m) for m in models])
    axes[0, 0].invert_yaxis()
    figure.legend(loc="lower center", ncol=3, fontsize=8, bbox_to_anchor=(0.5, -0.02))
    figure.suptitle("Closed − open gap per model (paired bootstrap 95% CI)")
    figure.tight_layout(rect=(0, 0.06, 1, 1))
    return _save(figure, path)


def all_plots(scores: list[ConfigScore], deltas: list[Delta], outcomes: pd.DataFrame, report, display: Callable[[str], str],
              out_dir: Path, heatmap_field: str = "sub_modality") -> dict[str, str]:
    """Write every plot into `out_dir`; returns {title: file name} for the ones that had data."""
    made: dict[str, str] = {}
    candidates = [
        ("F1 per configuration", lambda p: f1_by_config(scores, outcomes, display, p, random_baselines(report)),
         "f1_by_config.png"),
        ("Closed − open gap per model", lambda p: delta_by_model(deltas, display, p), "delta_by_model.png"),
        (f"Model × {heatmap_field.replace('_', '-')} (closed)",
         lambda p: heatmap_by_field(outcomes, heatmap_field, Form.CLOSED, display, p), f"heatmap_{heatmap_field}_closed.png"),
        (f"Model × {heatmap_field.replace('_', '-')} (open)",
         lambda p: heatmap_by_field(outcomes, heatmap_field, Form.OPEN, display, p), f"heatmap_{heatmap_field}_open.png"),
    ]
    for title, draw, name in candidates:
        if draw(out_dir / name) is not None:
            made[title] = name
    return made
