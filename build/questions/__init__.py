"""Questions: samples -> task items -> placed on their PNGs -> instantiated questions, closed options, aliases, lint.

The rows step's typed rows (`rows`): TaskItem -> PlacedItem -> QuestionRow, made a table once, at the writer.

Public face:
    task_items(samples, manifest) -> [TaskItem]                     one per question to ask
    attach_metadata(items, valid_metadata) -> ([TaskItem], [Exclusion])
    place_items(items, converted, roi_dir) -> ([PlacedItem], [Exclusion])   onto their PNGs; ROI PNGs written
    instantiate_questions(placed, manifest, taxonomy, seed) -> ([QuestionRow], [Exclusion])
    rows_frame(question_rows) -> DataFrame                          the table rows.parquet holds (ROW_COLUMNS)
    lint_questions(question_rows, taxonomy) -> DataFrame            one row per offending word
    drop_lint_failures(question_rows, failures) -> ([QuestionRow], [Exclusion])   rejected rows become exclusions
    lint_labels(labels, taxonomy) -> DataFrame                      warnings for disease-like labels
    format_lint_report(failures) -> str
    load_prototypes() -> Prototypes
    box_option_problems(options, answer, gold_boxes, size, content) -> [str]   closed detection's rules, per row
    read_content_mask(png) -> ContentMask                           where an image shows something
    wording_problems(rows, manifest, taxonomy) -> [WordingProblem]  wording rules over a dataset's rows
"""
from mmbu.build.questions.box_options import box_option_problems
from mmbu.build.questions.content import ContentMask, content_mask, read_content_mask
from mmbu.build.questions.grounding import ConvertedImage, place_items
from mmbu.build.questions.instantiate import answer_aliases, instantiate_questions, label_set
from mmbu.build.questions.items import attach_metadata, task_items
from mmbu.build.questions.lint import (
    LINT_COLUMNS,
    drop_lint_failures,
    format_lint_report,
    lint_labels,
    lint_questions,
)
from mmbu.build.questions.options import rng_for
from mmbu.build.questions.prototypes import TEMPLATE_COLUMNS, TEMPLATES, Prototypes, load_prototypes
from mmbu.build.questions.rows import (ITEM_COLUMNS, QUESTION_ROW_COLUMNS, ROW_COLUMNS, PlacedItem, QuestionRow, TaskItem,
                                       rows_frame)
from mmbu.build.questions.wording_rules import WordingProblem, wording_problems
from mmbu.core.boxes import box_text, iou

__all__ = [
    "ITEM_COLUMNS", "LINT_COLUMNS", "QUESTION_ROW_COLUMNS", "ROW_COLUMNS", "TEMPLATES", "TEMPLATE_COLUMNS", "ContentMask",
    "ConvertedImage", "PlacedItem", "Prototypes", "QuestionRow", "TaskItem", "WordingProblem", "box_option_problems", "content_mask", "read_content_mask", "wording_problems",
    "answer_aliases", "attach_metadata", "box_text", "drop_lint_failures", "format_lint_report", "instantiate_questions", "iou",
    "label_set", "lint_labels", "lint_questions", "load_prototypes", "place_items", "rng_for", "rows_frame", "task_items",
]
