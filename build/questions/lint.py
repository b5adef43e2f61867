"""The wording lint: questions speak only of what is visible (docs/architecture.md §4 "Questions").

It rejects disease names, clinical outcomes, words implying malignancy and abbreviations, from the
maintained lists in `lint_words.yaml` plus every abbreviation in the taxonomy and any all-capitals
token. Label texts are the dataset's own vocabulary and are exempt inside questions (a detection
question names its target); `lint_labels` reports labels that hit the lists as warnings instead.
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import pandas as pd

from mmbu.build.questions.prototypes import TEMPLATE_COLUMNS, load_prototypes
from mmbu.build.questions.rows import QuestionRow
from mmbu.core.exclusions import Exclusion
from mmbu.core.release import CLOSED_QUESTION_COLUMNS, Task
from mmbu.core.wording import names
from mmbu.core.yaml_io import read_yaml
from mmbu.taxonomy.model import Taxonomy

WORDS_PATH = Path(__file__).with_name("lint_words.yaml")
LINT_COLUMNS = ("dataset_id", "sample_id", "task", "template", "category", "word", "question")
WORD_CATEGORIES = ("malignancy", "disease", "outcome")
ALL_CAPS = re.compile(r"(?<![\w&])[A-Z][A-Z0-9&]+(?![\w&])")
LABEL_MASK = "\x00"  # stands in for exempt label text while linting
NONE_OF_THE_ABOVE = load_prototypes().none_of_the_above


@dataclass(frozen=True)
class Hit:
    category: str
    word: str


class WordingLint:
    """Compiled word lists; `hits(text)` gives every offending word of one text."""

    def __init__(self, words: dict[str, list[str]], abbreviations: Iterable[str],
                 approved_caps: Iterable[str] = ()) -> None:
        # capital tokens inside the taxonomy's canonical names (e.g. "T1" in "T1-weighted") are the
        # approved wording, not abbreviations; explicit abbreviation lists still apply to them
        self.approved_caps = set(approved_caps) | set(words.get("not_abbreviations", []))
        self.patterns: list[tuple[str, re.Pattern[str]]] = []
        for category in WORD_CATEGORIES:
            listed = sorted(words.get(category, []), key=len, reverse=True)  # longest first: "covid-19" before "covid"
            if listed:
                # whole words, case-insensitive, with an optional plural ending; one pattern per category
                alternation = "|".join(re.escape(word) for word in listed)
                self.patterns.append((category, re.compile(rf"(?<![\w-])(?:{alternation})(?:s|es)?(?![\w-])",
                                                           re.IGNORECASE)))
        listed = sorted({*words.get("abbreviations", []), *abbreviations}, key=len, reverse=True)
        if listed:
            alternation = "|".join(re.escape(abbreviation) for abbreviation in listed)
            self.patterns.append(("abbreviation", re.compile(rf"(?<![\w&])(?:{alternation})(?![\w&])")))
        self._seen: dict[str, list[Hit]] = {}  # a dataset's questions repeat: lint each distinct text once

    def hits(self, text: str) -> list[Hit]:
        if text not in self._seen:
            self._seen[text] = self._scan(text)
        return list(self._seen[text])

    def _scan(self, text: str) -> list[Hit]:
        found: dict[str, Hit] = {}
        for category, pattern in self.patterns:
            for match in pattern.finditer(text):
                found.setdefault(match.group(0).casefold(), Hit(category, match.group(0)))
        for match in ALL_CAPS.finditer(text):
            if match.group(0) not in self.approved_caps:
                found.setdefault(match.group(0).casefold(), Hit("abbreviation", match.group(0)))
        return list(found.values())


@lru_cache(maxsize=4)
def _word_lists(path: str) -> dict[str, list[str]]:
    return read_yaml(path)


def wording_lint(taxonomy: Taxonomy, words_path: str | Path | None = None) -> WordingLint:
    canonical_caps = {m.group(0) for facet in taxonomy.facets for name in taxonomy.names(facet)
                      for m in ALL_CAPS.finditer(name)}
    return WordingLint(_word_lists(str(words_path or WORDS_PATH)), taxonomy.abbreviations(), canonical_caps)


def _leaked_option(question: str, options: Iterable[str]) -> str | None:
    """The first option the question names, as written or as its plural ("vessels" names "vessel")."""
    for option in options:
        if names(question, option):
            return option
    return None


def _mask_labels(text: str, labels: Iterable[str]) -> str:
    for label in sorted({lab for lab in labels if isinstance(lab, str) and lab}, key=len, reverse=True):
        text = re.sub(re.escape(label), LABEL_MASK, text, flags=re.IGNORECASE)
    return text


def lint_questions(rows: Sequence[QuestionRow], taxonomy: Taxonomy, words_path: str | Path | None = None
                   ) -> pd.DataFrame:
    """One row per (question, offending word), columns `LINT_COLUMNS`; empty when every question is clean."""
    lint = wording_lint(taxonomy, words_path)
    records = []
    # a dataset's rows repeat a few questions with a few option lists: each combination is checked once
    found: dict[tuple[object, ...], list[Hit]] = {}
    # the closed form's own questions (closed detection's) are linted as the templates' are
    asked = [*TEMPLATE_COLUMNS.items(), *((f"{t} (closed)", name) for t, name in CLOSED_QUESTION_COLUMNS.items())]
    for row in rows:
        exempt = (row.target, row.label)
        # a classification question must not contain its options' labels (detection names its target)
        options = () if row.task == Task.DETECTION else tuple(o for o in row.options if o != NONE_OF_THE_ABOVE)
        for template, name in asked:
            question = row.questions.get(name)
            if not isinstance(question, str):
                continue
            key = (question, options, *(label for label in exempt if isinstance(label, str) and label))
            if key not in found:
                leaked = _leaked_option(question, options)
                found[key] = ([Hit("answer_leak", leaked)] if leaked else []) + lint.hits(_mask_labels(question, exempt))
            for hit in found[key]:
                records.append({"dataset_id": row.dataset_id, "sample_id": row.sample_id, "task": row.task.value,
                                "template": template, "category": hit.category, "word": hit.word,
                                "question": question})
    return pd.DataFrame(records, columns=list(LINT_COLUMNS))


def lint_labels(labels: Iterable[str], taxonomy: Taxonomy, words_path: str | Path | None = None) -> pd.DataFrame:
    """Labels that hit the word lists (warnings: labels are allowed to be disease-like)."""
    lint = wording_lint(taxonomy, words_path)
    records = [{"label": label, "category": hit.category, "word": hit.word}
               for label in labels for hit in lint.hits(label)]
    return pd.DataFrame(records, columns=["label", "category", "word"])


def format_lint_report(failures: pd.DataFrame, limit: int = 20) -> str:
    """A readable report: one line per offending question, grouped by dataset."""
    if failures.empty:
        return "wording lint: every question is clean"
    lines = [f"wording lint: {failures['sample_id'].nunique()} question row(s) use forbidden words"]
    for row in failures.head(limit).itertuples(index=False):
        lines.append(f"  {row.dataset_id} {row.sample_id} [{row.task}/{row.template}] "
                     f"{row.category} word {row.word!r}: {row.question}")
    if len(failures) > limit:
        lines.append(f"  ... and {len(failures) - limit} more (see the lint report CSV)")
    return "\n".join(lines)


def drop_lint_failures(rows: Sequence[QuestionRow], failures: pd.DataFrame
                       ) -> tuple[list[QuestionRow], list[Exclusion]]:
    """Rows whose questions pass the lint, and one exclusion (stage `lint`) per rejected row."""
    if failures.empty:
        return list(rows), []
    exclusions = []
    for (dataset_id, sample_id), group in failures.groupby(["dataset_id", "sample_id"], sort=True):
        words = ", ".join(f"{w!r} ({c}, {t})" for w, c, t in
                          group[["word", "category", "template"]].drop_duplicates().itertuples(index=False))
        exclusions.append(Exclusion(dataset_id=dataset_id, sample_id=sample_id, item=sample_id, stage="lint",
                                    reason=f"the question wording uses forbidden words: {words}"))
    rejected = set(failures["sample_id"])
    return [row for row in rows if row.sample_id not in rejected], exclusions
