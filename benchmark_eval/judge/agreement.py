"""Agreement between two judges on the same (answer, gold) pairs: Cohen's kappa and flip rate.

Only pairs both judges decided by an LLM verdict count (pre-checked pairs are equivalent by
construction, and judge errors have no verdict to compare).
"""
from __future__ import annotations

import warnings

from mmbu.benchmark_eval.judge.cache import Judgement, VerdictCache


def _llm_verdicts(entries: list[Judgement], judge_model: str, prompt_version: str) -> dict[tuple[str, str], str]:
    return {(e.answer, e.gold): e.verdict for e in entries
            if e.judge_model == judge_model and e.prompt_version == prompt_version
            and e.method == "llm" and e.verdict != "error"}


def cohen_kappa(first: list[str], second: list[str]) -> float | None:
    """Cohen's kappa of two raters over the same items; None when it is undefined (no variation)."""
    if not first:
        return None
    # imported here: scikit-learn costs every `mmbu eval judge` process ~1.5 s of start-up, and only a second judge
    # needs it
    from sklearn.metrics import cohen_kappa_score

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # undefined kappa (no variation) warns; it is reported as None
        value = cohen_kappa_score(first, second, labels=["equivalent", "not_equivalent"])
    return None if value != value else float(value)  # NaN: both raters constant


def judge_agreement(cache: VerdictCache, first_model: str, second_model: str, prompt_version: str) -> dict:
    """``{"n", "kappa", "flip_rate", "agree", "first_only_equivalent", "second_only_equivalent"}``."""
    entries = cache.entries()
    first = _llm_verdicts(entries, first_model, prompt_version)
    second = _llm_verdicts(entries, second_model, prompt_version)
    shared = sorted(first.keys() & second.keys())
    a, b = [first[k] for k in shared], [second[k] for k in shared]
    flips = sum(x != y for x, y in zip(a, b))
    return {
        "first_judge": first_model, "second_judge": second_model, "prompt_version": prompt_version,
        "n": len(shared), "kappa": cohen_kappa(a, b), "flip_rate": flips / len(shared) if shared else None,
        "agree": len(shared) - flips,
        "first_only_equivalent": sum(x == "equivalent" and y != "equivalent" for x, y in zip(a, b)),
        "second_only_equivalent": sum(y == "equivalent" and x != "equivalent" for x, y in zip(a, b)),
    }
