"""Merge the same dataset found on several sources: same DOI, same URL, or same normalised title
(titles only across hosts: two records of one host are two datasets, however alike their titles).

The kept record is the one from the most authoritative host (Zenodo, then Hugging Face, then Kaggle,
then Papers with Code); the others become `also_found_in` and lend their queries, tags and parents.
"""
from __future__ import annotations

import re
from collections.abc import Iterable

from mmbu.curation.sources.candidate import Candidate, SourceRef
from mmbu.taxonomy.model import normalise_text

SOURCE_RANK = {"zenodo": 0, "huggingface": 1, "kaggle": 2, "paperswithcode": 3}


def normalise_url(url: str) -> str:
    url = re.sub(r"^https?://(www\.)?", "", url.strip().casefold())
    return url.rstrip("/")


def identity_keys(candidate: Candidate) -> list[str]:
    keys = [f"ref:{candidate.ref.casefold()}", f"url:{normalise_url(candidate.url)}"]
    if candidate.doi:
        keys.append(f"doi:{candidate.doi.casefold()}")
    if candidate.homepage:
        keys.append(f"url:{normalise_url(candidate.homepage)}")
    title = normalise_text(candidate.title)
    if len(title) >= 8:  # short titles ("data", "images") would merge strangers
        keys.append(f"title:{title}")
    keys += [f"ref:{ref.ref.casefold()}" for ref in candidate.also_found_in]
    keys += [f"ref:{link.casefold()}" for link in candidate.related if link.startswith("paperswithcode:")]
    return keys


def _merge_into(kept: Candidate, other: Candidate) -> None:
    for item in [SourceRef(source=other.source, id=other.id, url=other.url), *other.also_found_in]:
        if item.ref != kept.ref and item.ref not in {ref.ref for ref in kept.also_found_in}:
            kept.also_found_in.append(item)
    for field in ("queries", "keywords", "source_datasets", "related", "annotations_creators"):
        merged = getattr(kept, field)
        merged.extend(value for value in getattr(other, field) if value not in merged)
    kept.duplicate_licenses.setdefault(other.ref, other.license_raw)
    kept.duplicate_licenses.update({ref: raw for ref, raw in other.duplicate_licenses.items() if ref != kept.ref})
    kept.doi = kept.doi or other.doi
    kept.homepage = kept.homepage or other.homepage
    if not kept.description:
        kept.description = other.description


def dedupe(candidates: Iterable[Candidate]) -> list[Candidate]:
    """Duplicates merged (union-find over the identity keys), in first-seen order of each group."""
    items = list(candidates)
    parent = list(range(len(items)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    owner: dict[str, int] = {}
    for index, candidate in enumerate(items):
        for key in identity_keys(candidate):
            if key not in owner:
                owner[key] = index
            elif key.startswith("title:") and items[owner[key]].source == candidate.source:
                continue  # one host's ids are distinct datasets, however alike their titles
            else:
                parent[find(index)] = find(owner[key])
    groups: dict[int, list[int]] = {}
    for index in range(len(items)):
        groups.setdefault(find(index), []).append(index)
    merged = []
    for members in sorted(groups.values(), key=min):
        ordered = sorted(members, key=lambda i: (SOURCE_RANK[items[i].source], i))
        kept = items[ordered[0]]
        for index in ordered[1:]:
            _merge_into(kept, items[index])
        merged.append(kept)
    return merged
