"""Taxonomy gaps: leaves (sub-modalities, or modalities without any) with fewer accepted datasets than a target."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from mmbu.curation.manifest import ManifestError, load_manifest
from mmbu.taxonomy.model import Taxonomy, Term


@dataclass(frozen=True)
class Gap:
    """A leaf to search for. `leaf` is a sub-modality term, or a modality when it has no sub-modalities."""

    modality: Term
    leaf: Term
    accepted: int
    target: int

    @property
    def key(self) -> str:
        return self.leaf.id

    @property
    def missing(self) -> int:
        return max(0, self.target - self.accepted)


def leaves(taxonomy: Taxonomy) -> list[tuple[Term, Term]]:
    """(modality, leaf) pairs in taxonomy file order."""
    subs = taxonomy.terms("sub_modality") if "sub_modality" in taxonomy.facets else []
    pairs = []
    for modality in taxonomy.terms("modality"):
        children = [term for term in subs if term.parent == modality.id]
        pairs.extend((modality, child) for child in children) if children else pairs.append((modality, modality))
    return pairs


def count_accepted(manifest_dir: Path, taxonomy: Taxonomy) -> tuple[Counter[str], list[str]]:
    """Accepted datasets per leaf id, from `manifests/datasets/*.yaml`; unreadable manifests are reported."""
    counts: Counter[str] = Counter()
    problems: list[str] = []
    for path in sorted(Path(manifest_dir).glob("*.yaml")) if Path(manifest_dir).is_dir() else []:
        try:
            manifest = load_manifest(path)
        except ManifestError as exc:
            problems.append(f"{exc} (not counted towards the taxonomy gaps)")
            continue
        term = taxonomy.resolve("sub_modality", manifest.metadata.sub_modality) if "sub_modality" in taxonomy.facets else None
        term = term or taxonomy.resolve("modality", manifest.metadata.modality)
        if term is None:
            problems.append(f"{path}: field metadata.sub_modality: {manifest.metadata.sub_modality!r} is not a taxonomy "
                            "term (not counted towards the taxonomy gaps)")
            continue
        counts[term.id] += 1
    return counts, problems


def find_gaps(taxonomy: Taxonomy, counts: Counter[str], target: int) -> list[Gap]:
    """Leaves under the target, emptiest first (ties in taxonomy order), so a query budget goes where it helps."""
    gaps = [Gap(modality, leaf, counts.get(leaf.id, 0), target) for modality, leaf in leaves(taxonomy)]
    gaps = [gap for gap in gaps if gap.accepted < target]
    return sorted(gaps, key=lambda gap: gap.accepted)
