"""The release's columns and their Hugging Face features (DESIGN §3.4; names are a contract)."""
from __future__ import annotations

import datasets

from mmbu.curation.manifest import METADATA_FIELDS, TASKS

CONFIGS = TASKS  # one config per task
SPLIT = "test"

# §3.4 columns, in release order; extras follow and may grow, none of these may be renamed.
CONTRACT_COLUMNS = (
    "sample_id", "dataset_id", "image", "boxes", "mask", "target", "answer", "options",
    "question_no_context", "question_modality", "question_full_context", *METADATA_FIELDS, "license",
)
EXTRA_COLUMNS = (
    "task", "label", "answer_aliases", "image_sha256", "image_width", "image_height", "source_path",
    "question_version", "scanner_vendor", "objective_power", "microns_per_pixel",
)
RELEASE_COLUMNS = (*CONTRACT_COLUMNS, *EXTRA_COLUMNS)

_text = datasets.Value("string")


def release_features() -> datasets.Features:
    """Typed columns; `image` and `mask` are `Image` features so `load_dataset` decodes them."""
    spec: dict[str, object] = {column: _text for column in RELEASE_COLUMNS}
    spec |= {
        "image": datasets.Image(),
        "mask": datasets.Image(),
        "boxes": datasets.List(datasets.List(datasets.Value("int32"), length=4)),
        "options": datasets.List(_text),
        "answer_aliases": datasets.List(_text),
        "image_width": datasets.Value("int32"),
        "image_height": datasets.Value("int32"),
        "objective_power": datasets.Value("float64"),
        "microns_per_pixel": datasets.Value("float64"),
    }
    return datasets.Features({column: spec[column] for column in RELEASE_COLUMNS})
