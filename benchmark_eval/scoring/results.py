"""What scoring hands the report and the files: one typed record per configuration score, Δ, breakdown cell,
pair of models, diagnostics row and overall mean.

`as_record()` spells a record as `scores.json`, its side files and the CSVs do (the contract in `scores.py`): a
`kind` first where the file mixes kinds, then the fields in their order. `records(items)` spells a list.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, ClassVar


@dataclass(frozen=True)
class _Record:
    KIND: ClassVar[str | None] = None  # the `kind` a mixed file tells records apart by

    def as_record(self) -> dict[str, Any]:
        body = {item.name: getattr(self, item.name) for item in dataclasses.fields(self)}
        return {"kind": self.KIND, **body} if self.KIND else body


def records(items: Iterable[_Record]) -> list[dict[str, Any]]:
    return [item.as_record() for item in items]


@dataclass(frozen=True)
class _OfConfig(_Record):
    """A record about one configuration: (model, task, form, template)."""

    model: str
    task: str
    form: str
    template: str

    @property
    def config(self) -> tuple[str, str, str, str]:
        return self.model, self.task, self.form, self.template


@dataclass(frozen=True)
class ConfigScore(_OfConfig):
    """The micro-F1 of one (model, task, form, template), with what it rests on."""

    KIND: ClassVar[str] = "score"
    n: int  # scored records
    f1: float | None  # None: nothing scored, or withheld (records missing)
    ci_low: float | None
    ci_high: float | None
    random_baseline: float | None
    parse_failures: int  # scored records whose answer could not be read (counted wrong)
    judge_errors: int  # open records without a verdict (left out of F1)
    unparseable_share: float | None  # closed: parse failures / scored
    assisted_f1: float | None  # closed, with an extractor: the replies the parser cannot read, as it reads them
    assisted_ci_low: float | None
    assisted_ci_high: float | None
    extracted: int
    # with the runs' coverage (`with_coverage`): records the selection calls for, and how many the run lacks
    expected: int | None = None
    missing: int | None = None

    @classmethod
    def unscored(cls, model: str, task: str, form: str, template: str) -> ConfigScore:
        """A configuration the run was asked for and has no record of."""
        return cls(model, task, form, template, n=0, f1=None, ci_low=None, ci_high=None, random_baseline=None,
                   parse_failures=0, judge_errors=0, unparseable_share=None, assisted_f1=None, assisted_ci_low=None,
                   assisted_ci_high=None, extracted=0)

    def as_record(self, with_coverage: bool = False) -> dict[str, Any]:
        """`expected` and `missing` are spelled when the scores were given the runs' coverage (null outside it)."""
        record = super().as_record()
        if not with_coverage:
            del record["expected"], record["missing"]
        return record


@dataclass(frozen=True)
class Delta(_Record):
    """Δ = F1(closed) − F1(open) of one (model, task, template), paired over the samples scored in both forms."""

    KIND: ClassVar[str] = "delta"
    model: str
    task: str
    template: str
    delta: float | None
    ci_low: float | None
    ci_high: float | None


@dataclass(frozen=True)
class Breakdown(_OfConfig):
    """The micro-F1 of one configuration over the records whose metadata `field` has `value`."""

    field: str
    value: Any
    n: int
    f1: float | None
    ci_low: float | None
    ci_high: float | None
    random_baseline: float | None


@dataclass(frozen=True)
class PairedComparison(_Record):
    """Per-record win / tie / loss of model A against model B (task, form, template "all": every record)."""

    model_a: str
    model_b: str
    task: str
    form: str
    template: str
    n: int
    wins: int
    ties: int
    losses: int
    win_rate: float | None
    loss_rate: float | None


@dataclass(frozen=True)
class Diagnostics(_OfConfig):
    """Per configuration: run errors, parse failures, judge errors and pending verdicts, with rates."""

    records: int
    scored: int
    run_errors: int
    parse_failures: int
    judge_failed: int
    judge_pending: int
    precheck: int
    parse_failure_rate: float | None
    judge_error_rate: float | None


@dataclass(frozen=True)
class OverallScore(_Record):
    """The unweighted mean of the tasks' F1 for one (model, form, template) (`overall.py`)."""

    KIND: ClassVar[str] = "overall"
    model: str
    form: str
    template: str
    f1: float | None
    tasks: int
    n: int
    averaging: str


@dataclass(frozen=True)
class OverallDelta(_Record):
    """Overall closed − overall open for one (model, template)."""

    KIND: ClassVar[str] = "overall_delta"
    model: str
    template: str
    delta: float
