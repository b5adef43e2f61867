"""The release contract is one table: the writer's features, the reader's required columns and the contract's
columns (docs/architecture.md §3.4)."""
from __future__ import annotations

import datasets

from mmbu.core.release import COLUMNS, CONTRACT_COLUMNS, QUESTION_COLUMNS, RELEASE_COLUMNS, TASKS, Task, \
    release_features

# docs/architecture.md §3.4, the contract table as written there
DOCUMENTED_COLUMNS = (
    "sample_id", "dataset_id", "image", "boxes", "mask", "target", "answer", "options",
    "question_no_context", "question_modality", "question_full_context",
    "image_source", "dataset_name", "domain", "modality", "sub_modality", "stain", "specimen", "specimen_subregion",
    "topic", "original_task", "context", "institution", "url", "license",
)


def test_the_contract_columns_are_design_s_in_its_order_and_come_first():
    assert CONTRACT_COLUMNS == DOCUMENTED_COLUMNS
    assert RELEASE_COLUMNS[:len(DOCUMENTED_COLUMNS)] == DOCUMENTED_COLUMNS
    assert len(set(RELEASE_COLUMNS)) == len(RELEASE_COLUMNS)
    assert all(column.note for column in COLUMNS if column.contract)  # the card explains each


def test_tasks_and_templates():
    assert TASKS == ("ungrounded_classification", "box_grounded_classification", "mask_grounded_classification",
                     "object_detection") == tuple(Task)
    assert QUESTION_COLUMNS == {"no_context": "question_no_context", "modality": "question_modality",
                                "full_context": "question_full_context"}


def test_features_type_every_column_as_load_dataset_decodes_it():
    features = release_features()
    assert list(features) == list(RELEASE_COLUMNS)
    assert isinstance(features["image"], datasets.Image) and isinstance(features["mask"], datasets.Image)
    assert features["boxes"] == datasets.List(datasets.List(datasets.Value("int32"), length=4))
    assert features["options"] == datasets.List(datasets.Value("string"))
    assert features["image_width"] == datasets.Value("int32")
    assert features["microns_per_pixel"] == datasets.Value("float64")
    assert features["answer"] == datasets.Value("string")
