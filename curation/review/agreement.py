"""Inter-annotator agreement per round: Cohen's kappa for two reviewers, Fleiss' kappa for more
(statsmodels' implementations), on the decision and on every criterion.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np
from statsmodels.stats.inter_rater import aggregate_raters, cohens_kappa, fleiss_kappa

from mmbu.curation.review.model import Review


@dataclass
class Agreement:
    question: str  # "decision" or a criterion name
    method: str  # "cohen", "fleiss" or "none"
    kappa: float | None
    items: int
    raters: int
    note: str = ""


def _ratings(reviews: list[Review], question: str) -> dict[str, dict[str, str]]:
    """candidate -> reviewer -> rating."""
    table: dict[str, dict[str, str]] = {}
    for review in reviews:
        value = review.decision if question == "decision" else review.verdicts.get(question)
        if value is not None:
            table.setdefault(review.candidate, {})[review.reviewer] = value
    return table


def agreement(reviews: list[Review], question: str = "decision") -> Agreement:
    """Kappa over the items rated by at least two reviewers."""
    table = {ref: raters for ref, raters in _ratings(reviews, question).items() if len(raters) >= 2}
    reviewers = sorted({name for raters in table.values() for name in raters})
    if not table:
        return Agreement(question, "none", None, 0, len(reviewers), "no item was rated by two reviewers")
    categories = sorted({value for raters in table.values() for value in raters.values()})
    if len(categories) == 1:  # chance agreement is 1, so kappa is 0/0
        return Agreement(question, "none", None, len(table), len(reviewers),
                         f"every rating was {categories[0]!r}; kappa is undefined")
    if len(reviewers) == 2:
        first, second = reviewers
        pairs = [(raters[first], raters[second]) for raters in table.values()]
        index = {value: i for i, value in enumerate(categories)}
        matrix = np.zeros((len(categories), len(categories)))
        for a, b in pairs:
            matrix[index[a], index[b]] += 1
        kappa = float(cohens_kappa(matrix, return_results=False))
        return Agreement(question, "cohen", kappa, len(pairs), 2)
    # Fleiss needs the same number of ratings per item: use the items with the most common count.
    size = Counter(len(raters) for raters in table.values()).most_common(1)[0][0]
    rows = [[categories.index(v) for v in raters.values()] for raters in table.values() if len(raters) == size]
    counts, _ = aggregate_raters(np.array(rows), n_cat=len(categories))
    kappa = float(fleiss_kappa(counts, method="fleiss"))
    skipped = len(table) - len(rows)
    note = f"{skipped} item(s) with another number of ratings left out" if skipped else ""
    return Agreement(question, "fleiss", kappa, len(rows), len(reviewers), note)
