"""How far the catalogue (`manifests/datasets/*.yaml`) covers the taxonomy and the paper, as data.

Counted per dataset manifest: its modality and sub-modality (resolved through the taxonomy), the kind of
source its tasks make it (a source with masks is a segmentation source, one with boxes but no masks a
detection source, one with whole-image labels only a classification source: the paper's 250 / 84 / 76
split), the benchmark tasks it feeds, its host, its licence and the verification level of its evidence (the
weakest of host, licence and layout; `mmbu.curation.manifest.evidence`), a one-word summary of it (primary, secondary,
single-listing, unverified) and the audit's patterns (`mmbu.curation.manifest.audit`). Expected samples are the counts the
manifests' `evidence.samples.count` state; a dataset without one is counted as "count unknown".
"""
from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path
from urllib.parse import urlsplit

from pydantic import BaseModel, Field

from mmbu.curation.catalogue.composition import CompositionProjection, project_composition
from mmbu.curation.catalogue.paper import (
    SOURCE_KINDS, PaperTargets, expected_samples, paper_targets, source_kind,
)
from mmbu.curation.composition import Composition
from mmbu.curation.manifest import DatasetManifest, ManifestError, load_manifest
from mmbu.curation.manifest.audit import audit_findings
from mmbu.curation.manifest.evidence import FACTS, LEVELS, LICENCE_BASES
from mmbu.curation.manifest.model import TASKS
from mmbu.taxonomy import Taxonomy

# Each dataset once, by the weakest thing a reviewer must take on trust: a fact with no confirming source
# (unverified), else a licence resting on one third-party listing, else a third party's word for the host, licence or
# layout (secondary), else the host's or authors' own pages and files for all three (primary).
EVIDENCE_SUMMARY = ("primary", "secondary", "single-listing", "unverified")
HOST_OF_KIND = {"zenodo": "zenodo.org", "figshare": "figshare.com", "huggingface": "huggingface.co",
                "kaggle": "kaggle.com", "local": "local"}
NO_EVIDENCE = "no evidence"


class Tally(BaseModel):
    """Datasets and the samples their manifests expect, for one value of one breakdown."""

    name: str
    datasets: int = 0
    samples: int = 0
    unknown_counts: int = Field(0, description="Datasets whose manifest states no sample count.")
    dataset_ids: list[str] = Field(default_factory=list)


class ModalityCoverage(Tally):
    sub_modalities: list[Tally] = Field(default_factory=list)

    @property
    def gaps(self) -> list[str]:
        return [s.name for s in self.sub_modalities if s.datasets == 0]


class Coverage(BaseModel):
    manifests_dir: str
    datasets: int
    samples: int
    unknown_counts: int
    unreadable: list[str] = Field(default_factory=list, description="Manifests that could not be read, with why.")
    modalities: list[ModalityCoverage]
    unresolved_modality: list[Tally] = Field(default_factory=list, description="Values outside the taxonomy.")
    source_kinds: list[Tally]
    tasks: list[Tally]
    hosts: list[Tally]
    licences: list[Tally]
    levels: list[Tally]
    licence_bases: list[Tally] = Field(default_factory=list, description="Whose word the licence rests on.")
    evidence: list[Tally] = Field(default_factory=list, description="Each dataset once: primary, secondary, "
                                                                    "single-listing or unverified (EVIDENCE_SUMMARY).")
    audit: dict[str, list[str]] = Field(default_factory=dict, description="The audit's patterns found in the "
                                                                         "catalogue: check -> one sentence each.")
    fact_levels: dict[str, dict[str, int]] = Field(description="fact -> level -> datasets (evidence per fact).")
    paper: PaperTargets
    composition: CompositionProjection | None = Field(
        None, description="Rows each composition profile yields (mmbu.curation.catalogue.composition).")

    @property
    def modality_gaps(self) -> list[str]:
        return [m.name for m in self.modalities if m.datasets == 0]


def hosts(manifest: DatasetManifest) -> list[str]:
    source = manifest.source
    if source.kind == "url":
        return sorted({urlsplit(f.url).netloc for f in source.files})
    return [HOST_OF_KIND[source.kind]]


def evidence_level(manifest: DatasetManifest) -> str:
    return manifest.evidence.weakest_required() if manifest.evidence else NO_EVIDENCE


def evidence_summary(manifest: DatasetManifest) -> str:
    """primary, secondary, single-listing or unverified (see EVIDENCE_SUMMARY); `no evidence` without any."""
    if manifest.evidence is None:
        return NO_EVIDENCE
    weakest = manifest.evidence.weakest_required()
    if weakest == "unverified":
        return "unverified"
    return "single-listing" if manifest.evidence.licence_basis() == "single listing" else weakest


def licence_basis(manifest: DatasetManifest) -> str:
    return manifest.evidence.licence_basis() if manifest.evidence else NO_EVIDENCE


def read_catalogue(manifests_dir: Path) -> tuple[list[DatasetManifest], list[str]]:
    """The readable manifests directly in the folder, and one line per unreadable one."""
    manifests, unreadable = [], []
    for path in sorted(p for p in Path(manifests_dir).glob("*.y*ml") if p.is_file()):
        try:
            manifests.append(load_manifest(path))
        except ManifestError as exc:
            unreadable.append(" ".join(str(exc).split())[:300])
    return manifests, unreadable


def catalogue_coverage(manifests_dir: Path, taxonomy: Taxonomy, composition: Composition | None = None) -> Coverage:
    """The catalogue's coverage; with `composition`, also the rows each of its profiles yields."""
    manifests, unreadable = read_catalogue(manifests_dir)
    modalities = {term.id: ModalityCoverage(name=term.name, sub_modalities=[
        Tally(name=sub.name) for sub in taxonomy.terms("sub_modality") if sub.parent == term.id])
        for term in taxonomy.terms("modality")}
    unresolved: dict[str, Tally] = {}
    breakdowns: dict[str, dict[str, Tally]] = defaultdict(dict)
    fact_levels = {fact: Counter() for fact in FACTS}
    for manifest in manifests:
        count = expected_samples(manifest)
        modality = taxonomy.resolve("modality", manifest.metadata.modality)
        sub = taxonomy.resolve("sub_modality", manifest.metadata.sub_modality)
        if modality is None:
            _add(unresolved.setdefault(manifest.metadata.modality, Tally(name=manifest.metadata.modality)),
                 manifest, count)
        else:
            entry = modalities[modality.id]
            _add(entry, manifest, count)
            for tally in entry.sub_modalities:
                if sub is not None and tally.name == sub.name:
                    _add(tally, manifest, count)
        values = {"source_kinds": [source_kind(manifest)], "tasks": list(manifest.tasks), "hosts": hosts(manifest),
                  "licences": [manifest.license], "levels": [evidence_level(manifest)],
                  "licence_bases": [licence_basis(manifest)], "evidence": [evidence_summary(manifest)]}
        for breakdown, names in values.items():
            for name in names:
                _add(breakdowns[breakdown].setdefault(name, Tally(name=name)), manifest, count)
        for fact, level in (manifest.evidence.levels() if manifest.evidence else {}).items():
            fact_levels[fact][level] += 1
    paper = paper_targets()
    return Coverage(
        manifests_dir=str(manifests_dir), datasets=len(manifests),
        samples=sum(expected_samples(m) or 0 for m in manifests),
        unknown_counts=sum(expected_samples(m) is None for m in manifests), unreadable=unreadable,
        modalities=list(modalities.values()), unresolved_modality=list(unresolved.values()),
        source_kinds=_ordered(breakdowns["source_kinds"], SOURCE_KINDS),
        tasks=_ordered(breakdowns["tasks"], TASKS),
        hosts=_by_size(breakdowns["hosts"]), licences=_by_size(breakdowns["licences"]),
        levels=_ordered(breakdowns["levels"], (*reversed(LEVELS), NO_EVIDENCE)),
        licence_bases=_ordered(breakdowns["licence_bases"], (*LICENCE_BASES, NO_EVIDENCE)),
        evidence=_ordered(breakdowns["evidence"], (*EVIDENCE_SUMMARY, NO_EVIDENCE)),
        audit=audit_findings(manifests),
        fact_levels={fact: {level: counts[level] for level in reversed(LEVELS)} for fact, counts in fact_levels.items()},
        paper=paper,
        composition=None if composition is None else project_composition(
            manifests, composition, paper, lambda m: _modality_name(m, taxonomy)),
    )


def _modality_name(manifest: DatasetManifest, taxonomy: Taxonomy) -> str:
    term = taxonomy.resolve("modality", manifest.metadata.modality)
    return term.name if term is not None else manifest.metadata.modality


def _add(tally: Tally, manifest: DatasetManifest, count: int | None) -> None:
    tally.datasets += 1
    tally.samples += count or 0
    tally.unknown_counts += count is None
    tally.dataset_ids.append(manifest.id)


def _ordered(found: dict[str, Tally], order: tuple[str, ...]) -> list[Tally]:
    """Every value of a fixed vocabulary, zero or not, in its order (gaps stay visible)."""
    return [found.get(name, Tally(name=name)) for name in order]


def _by_size(found: dict[str, Tally]) -> list[Tally]:
    return sorted(found.values(), key=lambda t: (-t.datasets, t.name))

