"""The 4 tasks × 2 forms × 3 templates of MMBU as data: what each task shows and asks."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from mmbu.core.release import CLOSED_QUESTION_COLUMNS, FORMS, QUESTION_COLUMNS, TASKS, TEMPLATES, Task

__all__ = ["FORMS", "TASK_SPECS", "TEMPLATES", "TaskSpec", "parse_choice"]


@dataclass(frozen=True)
class TaskSpec:
    name: str
    roi: Literal["none", "box", "mask"]   # what is drawn on the image
    detection: bool                        # the answer is a box (open) or a choice among boxes (closed)

    @property
    def columns(self) -> tuple[str, ...]:
        """Release columns the runner needs for this task (besides the image bytes)."""
        return ("sample_id", "dataset_id", "boxes", "target", "answer", "options", *QUESTION_COLUMNS.values())

    @property
    def optional_columns(self) -> tuple[str, ...]:
        """Columns read when the release has them (older releases lack them): closed detection's own questions."""
        return tuple(CLOSED_QUESTION_COLUMNS.values()) if self.detection else ()


TASK_SPECS: dict[str, TaskSpec] = {spec.name: spec for spec in (
    TaskSpec(Task.UNGROUNDED, "none", False),
    TaskSpec(Task.BOX_GROUNDED, "box", False),
    TaskSpec(Task.MASK_GROUNDED, "mask", False),
    TaskSpec(Task.DETECTION, "none", True),
)}
assert tuple(TASK_SPECS) == TASKS


def parse_choice(values: str | tuple[str, ...] | list[str] | None, allowed: tuple[str, ...], what: str) -> tuple[str, ...]:
    """A comma-separated selection checked against `allowed` (None or 'all' = everything)."""
    if values is None:
        return allowed
    items = [v.strip() for v in (values.split(",") if isinstance(values, str) else values) if v.strip()]
    if not items or items == ["all"]:
        return allowed
    unknown = [v for v in items if v not in allowed]
    if unknown:
        raise ValueError(f"unknown {what} {', '.join(repr(u) for u in unknown)}; choose from {', '.join(allowed)}")
    return tuple(v for v in allowed if v in items)
