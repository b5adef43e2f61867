"""Check dataset manifests beyond their structure, and report every problem of every file at once.

Structure (types, required fields) comes from the pydantic models. On top of it a manifest must:
have an `id` equal to its file stem and unique across the checked files; carry a current SPDX licence;
name taxonomy terms in its metadata (a sub-modality under the stated modality); ask only for tasks its
layout can provide; have a label vocabulary that questions can show (no abbreviations, enough labels
for the requested number of options); and record where its host, licence and layout were read, at
`secondary` level or better, with labels not made by a model or mined from reports (`evidence.py`).
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from mmbu.curation.manifest.evidence import evidence_problems
from mmbu.curation.manifest.hints import closest_name
from mmbu.curation.manifest.licences import spdx_problem
from mmbu.curation.manifest.model import METADATA_FACETS, DatasetManifest, ManifestError, load_manifest
from mmbu.taxonomy.model import Taxonomy
from mmbu.core.release import Task
from mmbu.core.text import shorten
from mmbu.core.wording import kind_of, names, same_wording

MANIFEST_SUFFIXES = (".yaml", ".yml")

INSTANCE_TASKS = frozenset({Task.BOX_GROUNDED, Task.DETECTION})
CLASSIFICATION_TASKS = frozenset({Task.UNGROUNDED, Task.BOX_GROUNDED, Task.MASK_GROUNDED})


@dataclass(frozen=True)
class ManifestProblem:
    """One defect: the file, the dotted field path inside it, and the reason."""

    file: Path
    field: str
    reason: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "reason", shorten(self.reason))  # a 10 MB value is quoted, not echoed whole

    def __str__(self) -> str:
        return f"{self.file}: {self.field}: {self.reason}"


@dataclass
class ValidationReport:
    """What a validation run saw: the files checked and every problem found."""

    files: list[Path] = field(default_factory=list)
    problems: list[ManifestProblem] = field(default_factory=list)
    manifests: dict[Path, DatasetManifest] = field(default_factory=dict)  # every file that parsed, as parsed

    @property
    def invalid_files(self) -> list[Path]:
        return sorted({problem.file for problem in self.problems})

    @property
    def ok(self) -> bool:
        return not self.problems


def find_manifest_files(paths: Iterable[str | Path]) -> list[Path]:
    """Manifest files named by `paths`: files as given, directories by their *.yaml / *.yml files.

    Raises FileNotFoundError naming the first path that does not exist.
    """
    files: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            files += sorted(p for p in path.iterdir() if p.is_file() and p.suffix in MANIFEST_SUFFIXES)
        elif path.exists():
            files.append(path)
        else:
            raise FileNotFoundError(f"{path}: no such file or directory")
    return files


def validate_files(files: Iterable[Path], taxonomy: Taxonomy, *, require_evidence: bool = True) -> ValidationReport:
    """Load and check every file; one file's problems never stop the others being checked.

    `require_evidence=False` (the build) accepts a manifest without a sufficient `evidence:` block; the
    catalogue's check (`mmbu manifests validate`, CI) keeps the default.
    """
    report = ValidationReport()
    ids: dict[str, Path] = {}
    for path in files:
        report.files.append(path)
        try:
            manifest = load_manifest(path)
        except ManifestError as exc:
            report.problems += [ManifestProblem(path, where, reason) for where, reason in exc.problems]
            continue
        try:
            found = check_manifest(manifest, path, taxonomy, require_evidence=require_evidence)
        except Exception as exc:  # noqa: BLE001 - a check that trips over a value costs its file, never the batch
            report.problems.append(ManifestProblem(path, "(file)", f"cannot be checked: unexpected "
                                                                   f"{type(exc).__name__}: {exc}"))
            continue
        report.manifests[path] = manifest
        report.problems += [ManifestProblem(path, where, reason) for where, reason in found]
        if manifest.id in ids:
            report.problems.append(ManifestProblem(path, "id", f"{manifest.id!r} is already the id of {ids[manifest.id]}"))
        ids.setdefault(manifest.id, path)
    return report


def check_manifest(manifest: DatasetManifest, path: Path | None, taxonomy: Taxonomy, *,
                   require_evidence: bool = True) -> list[tuple[str, str]]:
    """Every (field path, reason) problem of one parsed manifest beyond its structure."""
    problems: list[tuple[str, str]] = []
    if path is not None and manifest.id != path.stem:
        problems.append(("id", f"{manifest.id!r} must equal the file name stem {path.stem!r}"))
    reason = spdx_problem(manifest.license)
    if reason:
        problems.append(("license", reason))
    problems += list(_taxonomy_problems(manifest, taxonomy))
    problems += list(_task_problems(manifest))
    problems += list(_label_problems(manifest, taxonomy))
    problems += list(_other_problems(manifest))
    if require_evidence:
        problems += evidence_problems(manifest.evidence)
    return problems


def _not_a_term(taxonomy: Taxonomy, facet: str, raw: str) -> str:
    suggestion = taxonomy.closest(facet, raw)
    hint = f"; did you mean {suggestion.name!r}?" if suggestion else f"; see `mmbu taxonomy show --facet {facet}`"
    return f"{raw!r} is not a term of the taxonomy facet {facet!r}{hint}"


def _taxonomy_problems(manifest: DatasetManifest, taxonomy: Taxonomy) -> Iterator[tuple[str, str]]:
    metadata = manifest.metadata
    for field_name, facet in METADATA_FACETS.items():
        raw = getattr(metadata, field_name)
        if raw is None or facet not in taxonomy.facets:
            continue
        if taxonomy.resolve(facet, raw) is None:
            yield f"metadata.{field_name}", _not_a_term(taxonomy, facet, raw)
    modality = taxonomy.resolve("modality", metadata.modality)
    stated = [("metadata.sub_modality", metadata.sub_modality)]
    stated += [(f"labels.{raw}.sub_modality", spec.sub_modality) for raw in manifest.labels
               if (spec := manifest.label_spec(raw)).sub_modality]
    for where, raw in stated:
        sub_modality = taxonomy.resolve("sub_modality", raw)
        if sub_modality is None:
            if where != "metadata.sub_modality" and "sub_modality" in taxonomy.facets:  # the loop above said it
                yield where, _not_a_term(taxonomy, "sub_modality", raw)
            continue
        if modality and sub_modality.parent != modality.id:
            parent = taxonomy.get("modality", sub_modality.parent) if sub_modality.parent else None
            yield where, (
                f"{sub_modality.name!r} is a sub-modality of {parent.name if parent else 'no modality'!r}, "
                f"not of {modality.name!r}"
            )


def layout_tasks(manifest: DatasetManifest) -> frozenset[str]:
    """The tasks this manifest's layout can feed (each layout model says so in `feeds()`)."""
    return manifest.layout.feeds()


def _task_problems(manifest: DatasetManifest) -> Iterator[tuple[str, str]]:
    possible = layout_tasks(manifest)
    for index, task in enumerate(manifest.tasks):
        if task in possible:
            continue
        if task in INSTANCE_TASKS and manifest.layout.kind == "image_mask_pairs":
            reason = "needs boxes; an image_mask_pairs layout gives them only with `instances` (components or ids)"
        elif task in INSTANCE_TASKS:
            reason = ("needs boxes: a coco, yolo, voc, box_table or polygons layout, or masks that separate objects "
                      "(manifests/README.md, 'Which layout feeds which task')")
        elif task == Task.MASK_GROUNDED:
            reason = "needs masks: an image_mask_pairs, mask_files or polygons layout, or arrays/parquet with masks"
        else:
            reason = ("needs an image-level label: a folder_per_class, label_table or volume_table layout, or "
                      "arrays/parquet with labels")
        yield f"tasks.{index}", f"{task} {reason} (this layout is {manifest.layout.kind})"
    if len(set(manifest.tasks)) != len(manifest.tasks):
        yield "tasks", "lists a task more than once"


def _label_problems(manifest: DatasetManifest, taxonomy: Taxonomy) -> Iterator[tuple[str, str]]:
    display_names: set[str] = set()
    for raw in manifest.labels:
        spec = manifest.label_spec(raw)
        where = f"labels.{raw}"
        if not str(raw).strip():
            yield "labels", "a raw label is empty"
        if not spec.name.strip():
            yield where, "the display name is empty"
            continue
        display_names.add(spec.name.strip().casefold())
        if "_" in spec.name or re.search(r"\s\d+$", spec.name):
            yield where, f"display name {spec.name!r} looks like an identifier; write it as words (it is shown in questions)"
        found = taxonomy.abbreviations_in(spec.name)
        if found:
            yield where, f"display name {spec.name!r} uses the abbreviation(s) {', '.join(found)}; write them out in full"
    hints = manifest.questions
    for name in ("options_name", "target_name", "preparation"):  # each is printed in questions
        text = getattr(hints, name)
        found = taxonomy.abbreviations_in(text) if text else []
        if found:
            yield f"questions.{name}", f"{text!r} uses the abbreviation(s) {', '.join(found)}; write them out in full"
    for where, raw in _layout_raw_labels(manifest):
        if raw not in manifest.labels:
            yield where, f"raw label {raw!r} is not in labels (add it with its display name){_label_hint(raw, manifest)}"
    yield from _distractor_problems(manifest, taxonomy)
    if CLASSIFICATION_TASKS.intersection(manifest.tasks):
        distractors = len({same_wording(d) for d in hints.distractors})
        available = len(display_names) + distractors + (1 if hints.none_of_the_above else 0)
        if hints.n_options - int(hints.none_of_the_above) < 2 <= available - int(hints.none_of_the_above):
            yield "questions.n_options", (
                f"{hints.n_options} option(s) show only the answer{' and None of the above' if hints.none_of_the_above else ''}, "
                f"which is then the answer on every row: raise it so that another label or distractor is offered")
        if hints.n_options > available:
            extra = " plus 'None of the above'" if hints.none_of_the_above else ""
            yield "questions.n_options", (
                f"{hints.n_options} options asked, but the labels give only {len(display_names)} distinct display "
                f"name(s){f' and {distractors} distractor(s)' if distractors else ''}{extra} = {available}"
            )


def _terms(taxonomy: Taxonomy, wording: str) -> list[set[str]]:
    """Per facet the wording resolves in: its term and the terms above it."""
    found = []
    for facet in taxonomy.facets:
        term = taxonomy.resolve(facet, wording)
        if term is not None:
            found.append({f"{facet}:{term.id}"} | {f"{facet}:{t.id}" for t in taxonomy.ancestors(facet, term.id)})
    return found


def _distractor_problems(manifest: DatasetManifest, taxonomy: Taxonomy) -> Iterator[tuple[str, str]]:
    """A curated distractor must be wrong for every row: never a wording, a kind or a whole of one of the labels,
    nor a taxonomy term at, above or under one of theirs, nor named by the question's own words or the dataset's
    metadata, which the full-context question says (the lint would drop every row that offers it)."""
    hints = manifest.questions
    wordings = {w for raw in manifest.labels
                for w in (str(raw), manifest.label_spec(raw).name, *manifest.label_spec(raw).synonyms)}
    label_terms = [t for raw in manifest.labels for t in _terms(taxonomy, manifest.label_spec(raw).name)]
    metadata = manifest.metadata
    said = " ".join(same_wording(str(t)) for t in (hints.options_name, hints.preparation, metadata.modality,
                                                   metadata.sub_modality, metadata.stain, metadata.specimen,
                                                   metadata.specimen_subregion) if t)
    seen: set[str] = set()
    for index, distractor in enumerate(hints.distractors):
        where, form = f"questions.distractors.{index}", same_wording(distractor)
        clash = next((w for w in sorted(wordings) if kind_of(distractor, w)), None)
        found = taxonomy.abbreviations_in(distractor)
        if not form:
            yield where, "is empty"
        elif form in seen:
            yield where, f"{distractor!r} is listed twice"
        elif clash is not None:
            yield where, f"{distractor!r} could be right where the answer is {clash!r} (the same thing, or a kind of it)"
        elif any(a <= b or b <= a for a in _terms(taxonomy, distractor) for b in label_terms):
            yield where, f"{distractor!r} is, or lies above or under, a taxonomy term of one of the labels"
        elif names(said, form):
            yield where, f"{distractor!r} is named by the question (options_name, preparation or metadata)"
        elif found:
            yield where, f"{distractor!r} uses the abbreviation(s) {', '.join(found)}; write them out in full"
        seen.add(form)


def _layout_raw_labels(manifest: DatasetManifest) -> Iterator[tuple[str, str]]:
    """Raw labels the layout itself declares (the others are only known once the files are read)."""
    return manifest.layout.declared_labels()


def _label_hint(raw: str, manifest: DatasetManifest) -> str:
    suggestion = closest_name(raw, manifest.labels)
    return f"; did you mean {suggestion!r}?" if suggestion else ""


def _other_problems(manifest: DatasetManifest) -> Iterator[tuple[str, str]]:
    with_masks = manifest.layout.kind in ("image_mask_pairs", "mask_files") or (
        manifest.layout.kind == "arrays" and manifest.layout.masks is not None)
    if manifest.convert.slice == "mask_max_area" and not with_masks:
        yield "convert.slice", ("mask_max_area picks the slice with the largest mask, so it needs an image_mask_pairs "
                                "or mask_files layout, or arrays with masks")
    for where, value in (("metadata.url", manifest.metadata.url), ("homepage", manifest.homepage)):
        if value is not None and not re.match(r"^https?://\S+$", value):
            yield where, f"{value!r} is not an http(s) URL"
