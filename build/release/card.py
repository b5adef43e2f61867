"""The dataset card (README.md): YAML `configs:` so `load_dataset(release_dir, CONFIG)` works, a per-dataset
licence table, since the release mixes sources under different licences, what the version numbers mean, and how
to cite MMBU."""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import yaml

from mmbu.core.outputs import markdown_cell as _cell
from mmbu.core.release import COLUMNS, SPLIT
from mmbu.curation.manifest import DatasetManifest


# The paper, as its arXiv abstract page lists it (read at arxiv.cnoctave.top/abs/2606.06696, a mirror of
# arxiv.org/abs/2606.06696: title, first author "Ryan D'Cunha and 19 other authors", submitted 4 Jun 2026,
# cs.CV); the venue is the project's (docs/architecture.md §1: ECCV 2026).
MMBU_CITATION = """@misc{dcunha2026mmbu,
  title         = {{MMBU}: A Massive Multi-modal Biomedical Understanding Benchmark to Probe the Perception
                   Capabilities of Vision-Language Models},
  author        = {D'Cunha, Ryan and others},
  year          = {2026},
  eprint        = {2606.06696},
  archivePrefix = {arXiv},
  primaryClass  = {cs.CV},
  note          = {ECCV 2026}
}"""


def size_category(n: int) -> str:
    for limit, name in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M")):
        if n < limit:
            return name
    return "1M<n<10M"


def version_story(version: str, build_info: Mapping[str, object]) -> list[str]:
    """The card's "Versions" section: the data's version against the toolkit's, and what pins the bytes."""
    # Not the inputs hash: it covers the data folder's paths, and a release built in another folder from the same
    # sources is the same release, byte for byte (build_info.json, which SHA256SUMS covers too, holds it).
    toolkit = build_info.get("toolkit_version") or (build_info.get("packages") or {}).get("mmbu") or "unknown"
    return ["## Versions", "",
            f"Two version numbers meet here. **{version}** is the version of this data release: its rows, questions "
            f"and files. **{toolkit}** is the version of the MMBU toolkit (the software) that built it; the two move "
            "independently, so a toolkit release that changes nothing in the data keeps the data's version.", "",
            "`build_info.json` records both versions, every package version, the seeds and the hash of the build's "
            "inputs (`inputs_hash`); `SHA256SUMS` pins each file. This is MMBU rebuilt from the public sources, not "
            "the authors' own copy of the data.", ""]


def render_card(counts: Mapping[str, Mapping[str, int]], manifests: Sequence[DatasetManifest],
                version: str, excluded: int, build_info: Mapping[str, object] | None = None) -> str:
    """The card text. `counts` is {config: {dataset_id: rows}} for the configs that have rows; `build_info` gives
    the toolkit version of the version section and the composition profile the rows were taken under (its
    `composition`), stated in its own section."""
    build_info = build_info or {}
    composition = build_info.get("composition")
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
             f"# MMBU (rebuilt), release {version}", "",
             "Biomedical visual-perception benchmark rebuilt from public datasets by the MMBU toolkit: "
             "four tasks, each asked in a closed (options) and an open form with three prompt templates "
             "(no context, modality, full context). Every row carries 13 metadata fields and the SPDX "
             "licence of its source dataset.", "",
             *version_story(version, build_info),
             "## Configurations", "", "| config | rows | datasets |", "|---|---:|---:|"]
    for config, per in counts.items():
        lines.append(f"| `{config}` | {sum(per.values())} | {len(per)} |")
    lines += composition_section(composition)
    lines += ["", "Load one with `datasets.load_dataset(\"<release dir>\", \"ungrounded_classification\", "
              "split=\"test\")`, or any shard set with `load_dataset(\"parquet\", data_files=...)`.", "",
              "## Columns", "", "| column | content |", "|---|---|"]
    lines += [f"| `{column.name}` | {column.note} |" for column in COLUMNS if column.contract]
    extras = [f"`{c.name}` ({c.note})" if c.note else f"`{c.name}`" for c in COLUMNS if not c.contract]
    lines += ["", f"Extra columns: {', '.join(extras)}.", "",
              "## Source datasets and licences", "",
              "Each source keeps its own licence; the `license` column repeats it per row. Filter on it "
              "before any use the licence does not allow.", "",
              "| dataset | title | licence | rows | source | citation |", "|---|---|---|---:|---|---|"]
    rows_per_dataset: dict[str, int] = {}
    for per in counts.values():
        for dataset_id, n in per.items():
            rows_per_dataset[dataset_id] = rows_per_dataset.get(dataset_id, 0) + n
    for manifest in sorted(manifests, key=lambda m: m.id):
        lines.append(f"| `{manifest.id}` | {_cell(manifest.title)} | {_cell(manifest.license)} | "
                     f"{rows_per_dataset.get(manifest.id, 0)} | {_cell(manifest.homepage or manifest.metadata.url)} | "
                     f"{_cell(manifest.citation)} |")
    lines += ["", "## Exclusions", "",
              f"{excluded} item(s) were dropped while building; `exclusions.csv` lists each with its stage "
              "and reason. `SHA256SUMS` covers every file; `build_info.json` records versions, manifest and "
              "taxonomy hashes and seeds; `croissant.json` describes the files (sha256 per shard).", "",
              "## Citation", "",
              "Cite the MMBU paper, and each source dataset you use (its citation is in the table above):", "",
              "```bibtex", MMBU_CITATION, "```", ""]
    return "\n".join(lines)


def composition_section(composition: Mapping[str, object] | None) -> list[str]:
    """The card's statement of the composition profile (nothing for rows written without one)."""
    if not composition:
        return []
    return ["", "## Composition", "",
            f"Rows taken under the `{composition['profile']}` profile of composition version {composition['version']} "
            f"(seed {composition['seed']}; `{composition['file']}`, sha256 `{composition['sha256']}`): "
            f"{' '.join(str(composition.get('description', '')).split())} The same manifests, composition and seed "
            "give the same rows on any machine; `build_info.json` repeats these values."]


def render_license(manifests: Sequence[DatasetManifest]) -> str:
    """The aggregate LICENSE note the card links to."""
    lines = ["This release aggregates images from several public datasets; each keeps its own licence.",
             "The `license` column gives the SPDX id per row. Per dataset:", ""]
    lines += [f"- {m.id}: {_cell(m.license)} ({_cell(m.homepage or m.metadata.url)})"
              for m in sorted(manifests, key=lambda m: m.id)]
    return "\n".join(lines) + "\n"
