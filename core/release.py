"""The release contract (docs/architecture.md §3.4) as one typed table: the task configs, the templates, every column
with its type, whether the contract names it, and what it holds. The release writer (`mmbu.build.release`) writes
it, the evaluation's reader (`mmbu.benchmark_eval.release`) reads it, and the dataset card and Croissant
record describe it from here, so the two sides cannot drift.

Contract columns are never renamed or dropped; extra columns may be added (append a `Column`).
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    import datasets


class Task(StrEnum):
    """The four MMBU tasks; each is one release config (`data/<task>/`)."""

    UNGROUNDED = "ungrounded_classification"
    BOX_GROUNDED = "box_grounded_classification"
    MASK_GROUNDED = "mask_grounded_classification"
    DETECTION = "object_detection"


TASKS: tuple[str, ...] = tuple(task.value for task in Task)
"""The task names in canonical order (the release's configs, the manifests' `tasks`)."""
TASK_TITLES: dict[str, str] = {
    Task.UNGROUNDED.value: "Ungrounded classification",
    Task.BOX_GROUNDED.value: "Box-grounded classification",
    Task.MASK_GROUNDED.value: "Mask-grounded classification",
    Task.DETECTION.value: "Object detection",
}
"""How tables and figures name each task (the release statistics, the evaluation report)."""
TASK_SHORT_TITLES: dict[str, str] = {
    Task.UNGROUNDED.value: "ungrounded", Task.BOX_GROUNDED.value: "box-grounded",
    Task.MASK_GROUNDED.value: "mask-grounded", Task.DETECTION.value: "detection",
}
"""... where space is short (legends, console tables)."""
SPLIT = "test"


class Form(StrEnum):
    """How a question is asked; the two forms share a release row and are scored apart."""

    CLOSED = "closed"  # options to choose from (the row's `options`)
    OPEN = "open"  # free text (classification) or boxes (detection)


FORMS: tuple[str, ...] = tuple(form.value for form in Form)
"""The forms in canonical order (closed before open: run selections, score tables)."""


class Template(StrEnum):
    """The three prompt templates; they differ only in how the image is described."""

    NO_CONTEXT = "no_context"
    MODALITY = "modality"
    FULL_CONTEXT = "full_context"


TEMPLATES: tuple[str, ...] = tuple(template.value for template in Template)
QUESTION_COLUMNS: dict[str, str] = {template: f"question_{template}" for template in TEMPLATES}
"""template -> the column holding its question."""
CLOSED_QUESTION_COLUMNS: dict[str, str] = {template: f"closed_question_{template}" for template in TEMPLATES}
"""template -> the column holding the closed form's question where it is not the template question (closed
detection asks which box holds one instance; the open form asks for every one); null elsewhere."""
METADATA_FIELDS: tuple[str, ...] = (
    "image_source", "dataset_name", "domain", "modality", "sub_modality", "stain", "specimen",
    "specimen_subregion", "topic", "original_task", "context", "institution", "url",
)
"""The 13 per-sample metadata fields of MMBU, in release column order."""

ColumnType = Literal["string", "image", "int32", "float64", "boxes", "strings"]
"""`image`: PNG bytes (HF `Image` feature); `boxes`: a list of [x1, y1, x2, y2] int32 lists; `strings`: a list of
texts; the rest are scalars (null allowed)."""


@dataclass(frozen=True)
class Column:
    name: str
    type: ColumnType
    contract: bool  # named in docs/architecture.md §3.4: users and acceptance checks rely on it
    note: str | None = None  # what the dataset card says about it (None: a contract column it need not explain)


def _question(template: str) -> Column:
    return Column(QUESTION_COLUMNS[template], "string", True,
                  f"the {template.replace('_', ' ')} template question")


COLUMNS: tuple[Column, ...] = (
    Column("sample_id", "string", True, "stable id of the question row (same on every rebuild)"),
    Column("dataset_id", "string", True, "source dataset id (its manifest's file name)"),
    Column("image", "image", True, "the image as PNG (Image feature)"),
    Column("boxes", "boxes", True,
           "ROI or detection boxes, [x1, y1, x2, y2] in image pixels (pixel edges); null when unused"),
    Column("mask", "image", True, "ROI mask PNG for mask-grounded rows (255 inside); null otherwise"),
    Column("target", "string", True, "class asked about in object detection; null otherwise"),
    Column("answer", "string", True,
           "gold answer: the label text, or for detection the gold box as an [x1, y1, x2, y2] string"),
    Column("options", "strings", True,
           "closed-form options in presentation order (letter them A, B, C, ...); answer is one of them"),
    *(_question(template) for template in TEMPLATES),
    *(Column(field, "string", True, "metadata field") for field in METADATA_FIELDS),
    Column("license", "string", True, "SPDX id of the source"),
    # extras: more may be added, in any later position
    Column("task", "string", False),
    Column("label", "string", False, 'gold class, also when the closed answer is "None of the above"'),
    Column("answer_aliases", "strings", False),
    Column("image_sha256", "string", False),
    Column("image_width", "int32", False),
    Column("image_height", "int32", False),
    Column("source_path", "string", False),
    Column("question_version", "string", False),
    *(Column(CLOSED_QUESTION_COLUMNS[template], "string", False,
             f"the closed form's {template.replace('_', ' ')} question where it differs (detection); null otherwise")
      for template in TEMPLATES),
    Column("scanner_vendor", "string", False),
    Column("objective_power", "float64", False),
    Column("microns_per_pixel", "float64", False),
)
COLUMN_TYPES: dict[str, ColumnType] = {column.name: column.type for column in COLUMNS}
RELEASE_COLUMNS: tuple[str, ...] = tuple(column.name for column in COLUMNS)
"""Every column, in release order."""
CONTRACT_COLUMNS: tuple[str, ...] = tuple(column.name for column in COLUMNS if column.contract)
EXTRA_COLUMNS: tuple[str, ...] = tuple(column.name for column in COLUMNS if not column.contract)
IMAGE_COLUMNS: tuple[str, ...] = tuple(column.name for column in COLUMNS if column.type == "image")
LIST_COLUMNS: tuple[str, ...] = tuple(column.name for column in COLUMNS if column.type in ("boxes", "strings"))


def release_features() -> datasets.Features:
    """The Hugging Face features of a release row, in release order; `image` and `mask` are `Image`
    features so `load_dataset` decodes them. (Imports `datasets`, about a second: only writers need it.)"""
    import datasets

    text = datasets.Value("string")
    feature = {
        "string": text,
        "image": datasets.Image(),
        "int32": datasets.Value("int32"),
        "float64": datasets.Value("float64"),
        "boxes": datasets.List(datasets.List(datasets.Value("int32"), length=4)),
        "strings": datasets.List(text),
    }
    return datasets.Features({column.name: feature[column.type] for column in COLUMNS})
