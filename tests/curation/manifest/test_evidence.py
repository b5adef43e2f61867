"""`evidence:`: where each fact was read and at which level; validate rejects weak or missing evidence."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

sys.path.insert(0, str(Path(__file__).parent))
from factories import BASE_MANIFEST, manifest_dict, write_manifest  # noqa: E402

from mmbu.curation.manifest import load_manifest
from mmbu.curation.manifest.evidence import Citation, Evidence, citation_origin, reference_kind
from mmbu.curation.manifest.validate import validate_files
from mmbu.taxonomy import load_taxonomy

TAXONOMY = load_taxonomy()
EVIDENCE = BASE_MANIFEST["evidence"]


def problems(tmp_path, document, require_evidence=True):
    path = write_manifest(tmp_path, document)
    report = validate_files([path], TAXONOMY, require_evidence=require_evidence)
    return [(p.field, p.reason) for p in report.problems]


def with_evidence(**facts):
    return manifest_dict(evidence={**EVIDENCE, **facts})


@pytest.mark.parametrize("reference,kind", [
    ("https://zenodo.org/records/3835", "url"),
    ("http://imgcom.jsrt.or.jp/imgcom/wp-content/uploads/2018/11/Segmentation01.zip", "url"),
    ("constantinpape/torch-em@6f71247:torch_em/data/datasets/medical/busi.py", "repo"),
    ("dataset-ninja/bccd@0123456789abcdef0123456789abcdef01234567:src/settings.py", "repo"),
    ("repo:manifests/mirror/PROVENANCE.md", "local"),
    ("repo:manifests/mirror/PROVENANCE.md#files", "local"),
])
def test_reference_forms(reference, kind):
    assert reference_kind(reference) == kind


@pytest.mark.parametrize("reference", [
    "torch-em loader", "constantinpape/torch-em:torch_em/x.py", "constantinpape/torch-em@main:x.py",
    "constantinpape/torch-em@6f71247", "ftp://host.org/x", "https://", "repo:", "zenodo:3835",
])
def test_malformed_references_are_refused(reference):
    assert reference_kind(reference) is None
    with pytest.raises(ValidationError, match="is not a source reference"):
        Citation(source=reference, level="secondary")


def test_a_manifest_without_evidence_is_rejected_by_validate_but_not_by_the_build(tmp_path):
    document = manifest_dict()
    del document["evidence"]
    found = problems(tmp_path, document)
    assert found == [("evidence", "missing: record where the host, licence, layout, label provenance and sample "
                                  "count were read (see manifests/README.md, 'Evidence')")]
    assert problems(tmp_path, document, require_evidence=False) == []


@pytest.mark.parametrize("fact", ["host", "licence", "layout"])
def test_host_licence_and_layout_need_a_secondary_source_or_better(tmp_path, fact):
    weak = {fact: {"level": "unverified", "note": "no page states it"}}
    assert problems(tmp_path, with_evidence(**weak)) == [(f"evidence.{fact}", (
        "has only unverified sources; cite a primary or secondary source (the host's page, the authors' files, "
        "a loader or a listing)"))]
    # one unverified source beside a secondary one is fine: a fact's level is its best source's
    both = {fact: [weak[fact], {"source": "https://a.example.org/page", "level": "secondary"}]}
    if fact == "licence":  # one listing: said so
        both["licence_single_listing"] = True
    assert problems(tmp_path, with_evidence(**both)) == []


def test_labels_and_samples_may_be_unverified(tmp_path):
    document = with_evidence(labels={"provenance": "experts", "cites": {"level": "unverified", "note": "not stated"}},
                             samples={"cites": {"level": "unverified", "note": "no source states a count"}})
    assert problems(tmp_path, document) == []


@pytest.mark.parametrize("provenance", ["text mining", "model"])
def test_labels_mined_from_reports_or_made_by_a_model_exclude_the_dataset(tmp_path, provenance):
    labels = {"provenance": provenance, "cites": {"source": "https://a.example.org/paper", "level": "primary"}}
    found = problems(tmp_path, with_evidence(labels=labels))
    assert [field for field, _ in found] == ["evidence.labels.provenance"]
    assert f"labels made by {provenance} exclude a dataset" in found[0][1] and "review trail" in found[0][1]


def test_structural_errors_name_the_field(tmp_path):
    document = with_evidence(licence={"source": "the Kaggle page", "level": "primary"},
                             layout={"level": "secondary"}, samples={"count": 0, "cites": [{"level": "probable"}]})
    path = write_manifest(tmp_path, document)
    report = validate_files([path], TAXONOMY)
    fields = {p.field for p in report.problems}
    assert {"evidence.licence.0.source", "evidence.layout.0", "evidence.samples.count",
            "evidence.samples.cites.0.level"} <= fields
    assert any("a secondary citation needs its source" in p.reason for p in report.problems)


def test_levels_are_the_best_source_per_fact_and_the_weakest_required_fact(tmp_path):
    manifest = load_manifest(write_manifest(tmp_path, manifest_dict()))
    assert manifest.evidence.levels() == {"host": "primary", "licence": "primary", "layout": "secondary",
                                          "labels": "primary", "samples": "primary"}
    assert manifest.evidence.weakest_required() == "secondary"
    evidence = Evidence.model_validate({**EVIDENCE, "layout": [
        {"level": "unverified", "note": "guessed"}, {"source": "https://a.example.org", "level": "primary"}]})
    assert evidence.level("layout") == "primary" and len(evidence.citations("layout")) == 2


@pytest.mark.parametrize("reference,origin", [
    ("constantinpape/torch-em@6f71247:torch_em/data/datasets/medical/busi.py", "github.com/constantinpape"),
    ("dataset-ninja/bccd@0123456:src/settings.py", "github.com/dataset-ninja"),
    ("https://github.com/Dataset-Ninja/bccd/blob/main/LICENSE.md", "github.com/dataset-ninja"),
    ("https://raw.githubusercontent.com/dataset-ninja/bccd/main/README.md", "github.com/dataset-ninja"),
    ("https://huggingface.co/datasets/marmal88/skin_cancer", "huggingface.co/marmal88"),
    ("https://www.kaggle.com/datasets/kmader/malaria-bounding-boxes", "kaggle.com/kmader"),
    ("https://www.zenodo.org/records/3835", "zenodo.org"),
    ("repo:manifests/mirror/PROVENANCE.md", "this repository"),
])
def test_a_citation_s_origin_is_its_publisher(reference, origin):
    assert citation_origin(reference) == origin


def licence_evidence(*citations, single_listing=None):
    evidence = {**EVIDENCE, "licence": [{"source": s, "level": level, "quote": "CC BY 4.0"} for s, level in citations]}
    if single_listing is not None:
        evidence["licence_single_listing"] = single_listing
    return manifest_dict(evidence=evidence)


TORCH_EM = "constantinpape/torch-em@6f71247:torch_em/data/datasets/medical/busi.py"
NINJA = "dataset-ninja/busi@0123456:src/settings.py"


def test_a_licence_on_one_listing_must_say_so_and_is_counted_by_its_basis(tmp_path):
    # two files of one publisher are one listing
    one_listing = licence_evidence((TORCH_EM, "secondary"),
                                   ("constantinpape/torch-em@6f71247:README.md", "secondary"))
    assert problems(tmp_path, one_listing) == [(
        "evidence.licence", "rests on one third-party listing (github.com/constantinpape); cite the host's own page "
                            "or a second, independent listing, or say so with `licence_single_listing: true` under "
                            "evidence")]
    said = licence_evidence((TORCH_EM, "secondary"), single_listing=True)
    assert problems(tmp_path, said) == []
    assert load_manifest(write_manifest(tmp_path, said)).evidence.licence_basis() == "single listing"
    # the build does not require evidence, so it does not require the statement either
    assert problems(tmp_path, one_listing, require_evidence=False) == []


@pytest.mark.parametrize("citations,basis", [
    (((TORCH_EM, "secondary"), (NINJA, "secondary")), "independent listings"),
    (((TORCH_EM, "secondary"), ("https://zenodo.org/records/3835", "primary")), "host"),
])
def test_a_licence_on_the_host_or_two_listings_refuses_the_single_listing_statement(tmp_path, citations, basis):
    assert problems(tmp_path, licence_evidence(*citations)) == []
    assert load_manifest(write_manifest(tmp_path, licence_evidence(*citations))).evidence.licence_basis() == basis
    wrong = licence_evidence(*citations, single_listing=True)
    where = "the host" if basis == "host" else basis
    assert problems(tmp_path, wrong) == [("evidence.licence_single_listing",
                                          f"is true, but the licence rests on {where}; remove it")]
