"""The dataset card (README.md): YAML `configs:` so `load_dataset(release_dir, CONFIG)` works, and a
per-dataset licence table, since the release mixes sources under different licences."""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import yaml

from mmbu.build.release.features import CONTRACT_COLUMNS, SPLIT
from mmbu.curation.manifest import DatasetManifest

COLUMN_NOTES = {
    "sample_id": "stable id of the question row (same on every rebuild)",
    "dataset_id": "source dataset id (its manifest's file name)",
    "image": "the image as PNG (Image feature)",
    "boxes": "ROI or detection boxes, [x1, y1, x2, y2] in image pixels (pixel edges); null when unused",
    "mask": "ROI mask PNG for mask-grounded rows (255 inside); null otherwise",
    "target": "class asked about in object detection; null otherwise",
    "answer": "gold answer: the label text, or for detection the gold box as an [x1, y1, x2, y2] string",
    "options": "closed-form options in presentation order (letter them A, B, C, ...); answer is one of them",
}


def size_category(n: int) -> str:
    for limit, name in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M")):
        if n < limit:
            return name
    return "1M<n<10M"


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ") if text is not None else ""


def render_card(counts: Mapping[str, Mapping[str, int]], manifests: Sequence[DatasetManifest],
                version: str, excluded: int) -> str:
    """The card text. `counts` is {config: {dataset_id: rows}} for the configs that have rows."""
    total = sum(sum(per.values()) for per in counts.values())
    header = {
        "pretty_name": "MMBU (rebuilt from public sources)",
        "license": "other",
        "license_name": "mixed-source-licenses",
        "license_link": "LICENSE",
        "language": ["en"],
        "task_categories": ["visual-question-answering", "image-classification", "object-detection"],
        "tags": ["biomedical", "medical-imaging", "microscopy", "benchmark", "vlm-evaluation"],
        "size_categories": [size_category(total)],
        "source_datasets": sorted(m.id for m in manifests),
        "configs": [{"config_name": config,
                     "data_files": [{"split": SPLIT, "path": f"data/{config}/{SPLIT}-*.parquet"}]}
                    for config in counts],
    }
    lines = ["---", yaml.safe_dump(header, sort_keys=False, allow_unicode=True).rstrip(), "---", "",
             f"# MMBU (rebuilt), version {version}", "",
             "Biomedical visual-perception benchmark rebuilt from public datasets by the MMBU toolkit: "
             "four tasks, each asked in a closed (options) and an open form with three prompt templates "
             "(no context, modality, full context). Every row carries 13 metadata fields and the SPDX "
             "licence of its source dataset.", "",
             "## Configurations", "", "| config | rows | datasets |", "|---|---:|---:|"]
    for config, per in counts.items():
        lines.append(f"| `{config}` | {sum(per.values())} | {len(per)} |")
    lines += ["", "Load one with `datasets.load_dataset(\"<release dir>\", \"ungrounded_classification\", "
              "split=\"test\")`, or any shard set with `load_dataset(\"parquet\", data_files=...)`.", "",
              "## Columns", "", "| column | content |", "|---|---|"]
    for column in CONTRACT_COLUMNS:
        note = COLUMN_NOTES.get(column, "metadata field" if column != "license" else "SPDX id of the source")
        if column.startswith("question_"):
            note = f"the {column.removeprefix('question_').replace('_', ' ')} template question"
        lines.append(f"| `{column}` | {note} |")
    lines += ["", "Extra columns: `task`, `label` (gold class, also when the closed answer is \"None of the "
              "above\"), `answer_aliases`, `image_sha256`, `image_width`, `image_height`, `source_path`, "
              "`question_version`, `scanner_vendor`, `objective_power`, `microns_per_pixel`.", "",
              "## Source datasets and licences", "",
              "Each source keeps its own licence; the `license` column repeats it per row. Filter on it "
              "before any use the licence does not allow.", "",
              "| dataset | title | licence | rows | source | citation |", "|---|---|---|---:|---|---|"]
    rows_per_dataset: dict[str, int] = {}
    for per in counts.values():
        for dataset_id, n in per.items():
            rows_per_dataset[dataset_id] = rows_per_dataset.get(dataset_id, 0) + n
    for manifest in sorted(manifests, key=lambda m: m.id):
        lines.append(f"| `{manifest.id}` | {_cell(manifest.title)} | {manifest.license} | "
                     f"{rows_per_dataset.get(manifest.id, 0)} | {_cell(manifest.homepage or manifest.metadata.url)} | "
                     f"{_cell(manifest.citation)} |")
    lines += ["", "## Exclusions", "",
              f"{excluded} item(s) were dropped while building; `exclusions.csv` lists each with its stage "
              "and reason. `SHA256SUMS` covers every file; `build_info.json` records versions, manifest and "
              "taxonomy hashes and seeds; `croissant.json` describes the files (sha256 per shard).", ""]
    return "\n".join(lines)


def render_license(manifests: Sequence[DatasetManifest]) -> str:
    """The aggregate LICENSE note the card links to."""
    lines = ["This release aggregates images from several public datasets; each keeps its own licence.",
             "The `license` column gives the SPDX id per row. Per dataset:", ""]
    lines += [f"- {m.id}: {m.license} ({m.homepage or m.metadata.url})" for m in sorted(manifests, key=lambda m: m.id)]
    return "\n".join(lines) + "\n"
