"""One overall score per model, form and template: the unweighted mean of its tasks' micro-F1.

Each task weighs the same, however many rows it has (a task of 5,000 questions does not drown one of 500), as the
paper's per-task table reads. The mean is withheld (None) when one of the tasks has no F1 (an incomplete
configuration), and Δ = overall closed − overall open is given when both are. It is a summary, not a new metric:
no interval is given for it; the per-task intervals are in the scores.
"""
from __future__ import annotations

from collections import defaultdict

from mmbu.benchmark_eval.scoring.results import ConfigScore, OverallDelta, OverallScore
from mmbu.core.release import Form

AVERAGING = "unweighted mean of the per-task micro-F1 (each task weighs the same)"


def overall_scores(scores: list[ConfigScore]) -> list[OverallScore | OverallDelta]:
    """An `OverallScore` per (model, form, template) with scores, then an `OverallDelta` per (model, template) where
    both forms have an overall F1."""
    by_config: dict[tuple[str, str, str], list[ConfigScore]] = defaultdict(list)
    for item in scores:
        by_config[(item.model, item.form, item.template)].append(item)
    overall: list[OverallScore | OverallDelta] = []
    for (model, form, template), items in by_config.items():
        f1s = [item.f1 for item in items]
        mean = None if any(f1 is None for f1 in f1s) else round(sum(f1s) / len(f1s), 6)
        overall.append(OverallScore(model, form, template, f1=mean, tasks=len(items),
                                    n=sum(item.n or 0 for item in items), averaging=AVERAGING))
    means = {(o.model, o.form, o.template): o.f1 for o in overall}
    deltas = []
    for (model, form, template), f1 in means.items():
        other = means.get((model, Form.OPEN, template))
        if form == Form.CLOSED and f1 is not None and other is not None:
            deltas.append(OverallDelta(model, template, delta=round(f1 - other, 6)))
    return overall + deltas
