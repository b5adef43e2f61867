"""What each composition profile yields, projected from the manifests before anything is fetched.

Per dataset and task the estimate is min(images, quota): the images are the manifest's `evidence.samples.count`
(what its source states), the quota the profile's (`DatasetRule.quota`). It is an estimate twice over: a grounded
task's rows are its objects, which no manifest counts, so an image counts as one row (the release has at least
that many when each image holds an object); and a dataset whose manifest states no count is taken to fill its quota
(under `full` it is left out of the sums and counted apart). Exact figures are the build's: `selection.json` per
dataset and `build-report.json`.

The projection to the full catalogue takes the paper's 410 datasets in its split of source kinds (250 classification,
84 segmentation, 76 detection; `curation/data/paper_targets.yaml`) and gives each kind the rows per dataset that
today's datasets of that kind give on average. For a profile with `reference_rows` (paper: the authors' rows per
task) it also finds the cap per task that would give those rows at the full catalogue (`derived_caps`): the
arithmetic behind the file's caps, re-done on whatever the catalogue holds now.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path

from pydantic import BaseModel, Field

from mmbu.core.release import TASKS
from mmbu.curation.catalogue.paper import PaperTargets, expected_samples, paper_targets, source_kind
from mmbu.curation.composition import Composition, DatasetRule, load_composition
from mmbu.curation.manifest import DatasetManifest, ManifestError, load_manifest

CAP_SEARCH_LIMIT = 100_000


class DatasetRows(BaseModel):
    dataset_id: str
    modality: str
    source_kind: str
    images: int | None = Field(description="Images the manifest's source states (evidence.samples.count).")
    topics: list[str]
    rows: dict[str, dict[str, int | None]] = Field(
        description="profile -> task -> estimated rows (None: not known, no count and no cap).")


class ProfileRows(BaseModel):
    profile: str
    description: str
    total: int
    by_task: dict[str, int]
    by_modality: dict[str, int]
    topics: int = Field(description="Distinct topics of the datasets that give rows.")
    without_count: int = Field(0, description="Datasets left out of the sums (no count and no cap).")
    at_target: dict[str, int] = Field(description="task -> rows projected at the paper's catalogue.")
    reference: dict[str, int] | None = None
    caps: dict[str, int | None] | None = None
    derived_caps: dict[str, int | None] = Field(
        default_factory=dict, description="task -> the cap that would give `reference` rows at the paper's catalogue "
                                          "(None: no cap would, the stated images are too few).")


class CompositionProjection(BaseModel):
    version: int
    seed: int
    default_profile: str
    target_datasets: int
    target_by_kind: dict[str, int]
    target_topics: int | None = None
    datasets: int
    profiles: list[ProfileRows]
    per_dataset: list[DatasetRows]


def topics_of(manifest: DatasetManifest) -> list[str]:
    """A manifest's topics: its `topic`, split where it joins several with '|' (the authors' own convention)."""
    return [part.strip() for part in manifest.metadata.topic.split("|") if part.strip()]


def estimated_rows(manifest: DatasetManifest, rule: DatasetRule, task: str) -> int | None:
    """Rows of `task` the dataset gives under `rule`, estimated from its stated image count (module docstring)."""
    if task not in manifest.tasks:
        return 0
    images, quota = expected_samples(manifest), rule.quota(task, len(manifest.labels))
    if quota is None:
        return images
    return quota if images is None else min(images, quota)


def _at_target(manifests: Sequence[DatasetManifest], rules: dict[str, DatasetRule], task: str,
               paper: PaperTargets) -> int:
    """Rows of `task` at the paper's catalogue: per source kind, its paper count × today's mean rows per dataset."""
    by_kind: dict[str, list[int]] = defaultdict(list)
    for manifest in manifests:
        rows = estimated_rows(manifest, rules[manifest.id], task)
        if rows is not None:
            by_kind[source_kind(manifest)].append(rows)
    return round(sum(paper.sources_by_kind.get(kind, 0) * sum(rows) / len(rows) for kind, rows in by_kind.items()))


def _derived_cap(manifests: Sequence[DatasetManifest], rules: dict[str, DatasetRule], task: str, target: int,
                 paper: PaperTargets) -> int | None:
    """The smallest cap of `task` whose rows at the paper's catalogue reach `target` (bisection; rows grow with it);
    None when no cap does (the datasets' stated images are too few)."""
    def rows_with(cap: int) -> int:
        changed = {dataset_id: rule.model_copy(update={"caps": {**(rule.caps or {}), task: cap}})
                   for dataset_id, rule in rules.items()}
        return _at_target(manifests, changed, task, paper)

    low, high = 1, CAP_SEARCH_LIMIT
    if rows_with(high) < target:
        return None
    while low < high:
        middle = (low + high) // 2
        if rows_with(middle) >= target:
            high = middle
        else:
            low = middle + 1
    return low


def project_composition(manifests: Sequence[DatasetManifest], composition: Composition, paper: PaperTargets,
                        modality_of: Callable[[DatasetManifest], str] | None = None) -> CompositionProjection:
    """Every profile's estimated rows per dataset, task and modality, its topics and its rows at the paper's
    catalogue (see the module docstring for what is an estimate)."""
    modality_of = modality_of or (lambda manifest: manifest.metadata.modality)
    per_dataset = [DatasetRows(dataset_id=m.id, modality=modality_of(m), source_kind=source_kind(m),
                               images=expected_samples(m), topics=topics_of(m), rows={}) for m in manifests]
    profiles = []
    for name, profile in composition.profiles.items():
        rules = {m.id: composition.rule_for(m.id, name) for m in manifests}
        by_task: dict[str, int] = dict.fromkeys(TASKS, 0)
        by_modality: dict[str, int] = defaultdict(int)
        topics: set[str] = set()
        without = 0
        for manifest, entry in zip(manifests, per_dataset):
            rows = {task: estimated_rows(manifest, rules[manifest.id], task) for task in TASKS}
            entry.rows[name] = rows
            if any(value is None for value in rows.values()):
                without += 1
            if any(value is None or value > 0 for value in rows.values()):
                topics.update(entry.topics)
            for task, value in rows.items():
                by_task[task] += value or 0
                by_modality[entry.modality] += value or 0
        derived = {task: _derived_cap(manifests, rules, task, target, paper)
                   for task, target in (profile.reference_rows or {}).items()} if manifests else {}
        profiles.append(ProfileRows(
            profile=name, description=profile.description, total=sum(by_task.values()), by_task=by_task,
            by_modality=dict(sorted(by_modality.items())), topics=len(topics), without_count=without,
            at_target={task: _at_target(manifests, rules, task, paper) if manifests else 0 for task in TASKS},
            reference=profile.reference_rows, caps=profile.rows_per_dataset, derived_caps=derived))
    return CompositionProjection(version=composition.version, seed=composition.seed,
                                 default_profile=composition.default_profile, target_datasets=paper.datasets,
                                 target_by_kind=paper.sources_by_kind, target_topics=paper.topics,
                                 datasets=len(manifests), profiles=profiles, per_dataset=per_dataset)


def _derived(caps: dict[str, int | None], task: str) -> str:
    if task not in caps:
        return "-"
    return "none reaches it" if caps[task] is None else str(caps[task])


def _number(value: int | None) -> str:
    return "?" if value is None else f"{value:,}"


def composition_markdown(projection: CompositionProjection, *, per_dataset: bool = True) -> list[str]:
    """The projection as Markdown: per profile and task (today, at the paper's catalogue, the paper), per modality,
    and per dataset."""
    names = [p.profile for p in projection.profiles]
    paper_total = next((sum(p.reference.values()) for p in projection.profiles if p.reference), None)
    lines = [
        f"Composition version {projection.version} (seed {projection.seed}; `mmbu build` uses "
        f"`{projection.default_profile}` unless told `--profile`). Rows are estimates from the manifests' image counts "
        f"(a grounded row per image; a dataset without a count fills its quota, or is left out of `full`); "
        f"\"at {projection.target_datasets}\" gives each source kind today's mean rows per dataset at the paper's "
        f"{', '.join(f'{n} {k}' for k, n in projection.target_by_kind.items())} datasets. A row is asked in a closed "
        f"and an open form: rows × 2 are the questions"
        + (f" (the paper's {paper_total:,} rows are {2 * paper_total:,} questions: the authors' release has 77,358 "
           "rows, one per question and form)" if paper_total else "") + ".", "",
        "| profile | task | rows today | at " + str(projection.target_datasets) + " datasets | paper | cap | "
        "cap for the paper's rows |", "|---|---|---:|---:|---:|---:|---:|"]
    for profile in projection.profiles:
        for task in TASKS:
            reference = (profile.reference or {}).get(task)
            cap = (profile.caps or {}).get(task)
            lines.append(f"| {profile.profile} | {task} | {profile.by_task[task]:,} | {profile.at_target[task]:,} | "
                         f"{_number(reference) if reference else '-'} | {'all' if cap is None else cap} | "
                         f"{_derived(profile.derived_caps, task)} |")
        reference_total = _number(sum(profile.reference.values())) if profile.reference else "-"
        lines.append(f"| **{profile.profile}** | **all** | **{profile.total:,}**"
                     + (f" (+{profile.without_count} without a count)" if profile.without_count else "")
                     + f" | **{sum(profile.at_target.values()):,}** | {reference_total} | | |")
    target = f" (the paper: {projection.target_topics})" if projection.target_topics else ""
    lines += ["", "Distinct topics of the datasets that give rows: "
              + "; ".join(f"{p.profile} {p.topics}" for p in projection.profiles) + target + ".", "",
              "| modality | " + " | ".join(names) + " |", "|---|" + "---:|" * len(names)]
    modalities = sorted({m for p in projection.profiles for m in p.by_modality})
    lines += [f"| {modality} | " + " | ".join(f"{p.by_modality.get(modality, 0):,}" for p in projection.profiles)
              + " |" for modality in modalities]
    if per_dataset:
        lines += ["", "| dataset | images | " + " | ".join(names) + " |", "|---|---:|" + "---:|" * len(names)]
        for entry in projection.per_dataset:
            totals = [sum(v or 0 for v in entry.rows[name].values()) for name in names]
            unknown = [any(v is None for v in entry.rows[name].values()) for name in names]
            lines.append(f"| {entry.dataset_id} | {_number(entry.images)} | "
                         + " | ".join("?" if u else f"{t:,}" for t, u in zip(totals, unknown)) + " |")
    return lines


def composition_lines(manifest_paths: Sequence[Path]) -> list[str]:
    """The bundled composition's projection for these manifest files (the readable ones), as text for a terminal
    (`mmbu fetch --dry-run`)."""
    manifests = []
    for path in manifest_paths:
        try:
            manifests.append(load_manifest(path))
        except ManifestError:
            continue  # the plan names it already
    projection = project_composition(manifests, load_composition().composition, paper_targets())
    return ["", "Rows each composition profile yields (estimates from the manifests; `mmbu catalogue` says more):",
            "", *composition_markdown(projection)]
