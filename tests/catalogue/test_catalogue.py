"""The real catalogue as a whole: every manifest valid with its evidence, every reference well-formed, one manifest
per source, a trail file for every dataset, and no dataset on the contamination list."""
from __future__ import annotations

from collections import defaultdict
from urllib.parse import urlsplit

import pytest
from support.catalogue_replica import DATASETS, ROOT, TRAILS, catalogue_manifests, is_demo

from mmbu.curation.agent.contamination import ExclusionList
from mmbu.curation.manifest import find_manifest_files, load_manifest, validate_files
from mmbu.curation.manifest.evidence import FACTS, REPO_REF, reference_kind
from mmbu.curation.review.catalogue import load_trail_files
from mmbu.curation.review.rules import load_rules
from mmbu.curation.sources.candidate import Candidate
from mmbu.taxonomy.model import load_taxonomy

PATHS = find_manifest_files([DATASETS])
DEMO = ROOT / "manifests" / "demo"  # the offline demo's manifests cite the bundled mirror's PROVENANCE.md
MANIFESTS = [*catalogue_manifests(),
             *(load_manifest(path) for path in (find_manifest_files([DEMO]) if DEMO.is_dir() else []))]
CATALOGUE = [m for m in MANIFESTS if not is_demo(m)]


def test_every_manifest_validates_with_its_evidence():
    report = validate_files([*PATHS, *(find_manifest_files([DEMO]) if DEMO.is_dir() else [])], load_taxonomy())
    assert report.ok, "\n".join(map(str, report.problems))
    assert all(m.evidence is not None for m in MANIFESTS)


def references() -> list[tuple[str, str]]:
    """(where, reference) for every evidence citation and trail-file rejection."""
    found = []
    for manifest in MANIFESTS:
        for fact in FACTS:
            for index, citation in enumerate(manifest.evidence.citations(fact)):
                if citation.source:
                    found.append((f"{manifest.id}: evidence.{fact}.{index}", citation.source))
    trails, _ = load_trail_files(TRAILS.parent, load_rules())
    found += [(f"{t.path.name}: rejection.source", t.rejection.source) for t in trails if t.rejection]
    return found


@pytest.mark.parametrize("where,reference", references())
def test_evidence_references_are_well_formed(where, reference):
    kind = reference_kind(reference)
    assert kind is not None, f"{where}: {reference!r}"
    if kind == "url":
        parts = urlsplit(reference)
        assert parts.scheme in ("http", "https") and "." in parts.netloc, f"{where}: {reference!r}"
        assert parts.netloc not in ("example.org", "example.com"), f"{where}: placeholder URL"
    elif kind == "repo":
        match = REPO_REF.match(reference)
        assert not match["path"].startswith("/") and ".." not in match["path"].split("/"), f"{where}: {reference!r}"
    else:  # a file of this repository
        path = reference.removeprefix("repo:").split("#", 1)[0]
        assert (ROOT / path).is_file(), f"{where}: {path} is not a file of this repository"


def source_selection(manifest) -> tuple[str, frozenset[str] | None]:
    """(source identity, the files it takes or None for all) — what two manifests must not share."""
    source = manifest.source
    if source.kind == "url":
        return "url", frozenset(f.url for f in source.files)
    identifier = {"zenodo": "record", "figshare": "article", "huggingface": "repo", "kaggle": "dataset",
                  "local": "path"}[source.kind]
    chosen = getattr(source, "files", None) or getattr(source, "patterns", None)
    return f"{source.kind}:{getattr(source, identifier)}", frozenset(chosen) if chosen else None


def test_no_two_manifests_point_to_the_same_source():
    by_source = defaultdict(list)
    for manifest in CATALOGUE:
        identity, files = source_selection(manifest)
        if identity == "url":
            for url in files:
                by_source[f"url:{url}"].append((manifest.id, None))
        else:
            by_source[identity].append((manifest.id, files))
    clashes = []
    for identity, users in by_source.items():
        for index, (first, first_files) in enumerate(users):
            for second, second_files in users[index + 1:]:
                if first_files is None or second_files is None or first_files & second_files:
                    clashes.append(f"{first} and {second} both read {identity}")
    assert not clashes, "\n".join(clashes)


def test_every_catalogue_manifest_has_a_trail_file_and_every_trail_file_loads():
    trails, problems = load_trail_files(TRAILS.parent, load_rules())
    assert not problems, "\n".join(problems)
    named = {t.manifest for t in trails if t.manifest}
    assert not {m.id for m in CATALOGUE} - named, "manifests without a trail file in manifests/reviews/catalogue/"
    assert not named - {m.id for m in CATALOGUE}, "trail files naming a manifest that does not exist"


def as_candidate(manifest) -> Candidate:
    """The manifest as discovery would have seen it, so the discovery screen's contamination matcher applies."""
    source = manifest.source
    ref = {"zenodo": ("zenodo", str(getattr(source, "record", ""))),
           "huggingface": ("huggingface", getattr(source, "repo", "")),
           "kaggle": ("kaggle", getattr(source, "dataset", ""))}.get(source.kind, ("paperswithcode", manifest.id))
    text = [manifest.citation, manifest.metadata.context, manifest.metadata.image_source, manifest.metadata.topic]
    return Candidate(source=ref[0], id=ref[1], title=manifest.title, url=manifest.homepage or manifest.metadata.url,
                     description=" ".join(filter(None, text)), keywords=[manifest.metadata.dataset_name])


def test_no_manifest_is_on_the_contamination_list():
    exclusions = ExclusionList.load()
    hits = {m.id: [match.sentence for match in exclusions.match(as_candidate(m))] for m in CATALOGUE}
    assert not {name: sentences for name, sentences in hits.items() if sentences}


def test_the_37_sources_named_by_the_mmbu_authors_are_each_a_manifest_or_a_reasoned_rejection():
    trails, _ = load_trail_files(TRAILS.parent, load_rules())
    named = [t for t in trails if t.origin == "mmbu-named"]
    assert len(named) == 37, sorted(t.path.stem for t in named)
    undecided = [t.path.stem for t in named if not t.manifest and not t.rejection]
    assert not undecided, f"named sources with neither a manifest nor a rejection: {undecided}"
    assert all((DATASETS / f"{t.manifest}.yaml").is_file() for t in named if t.manifest)
