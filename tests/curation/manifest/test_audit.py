"""The audit's patterns as checks: each flags the shape the audit found and passes the honest variant beside it."""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from factories import manifest_dict  # noqa: E402

from mmbu.curation.manifest import DatasetManifest
from mmbu.curation.manifest.audit import (
    annex_branch_citations, audit_findings, code_licence_for_data, count_rests_on_items, unquoted_file_keys,
)


def manifest(evidence_changes: dict | None = None, **changes) -> DatasetManifest:
    document = manifest_dict(**changes)
    document["evidence"].update(evidence_changes or {})
    return DatasetManifest.model_validate(document)


def samples(count: int, quote: str, note: str | None = None) -> dict:
    return {"samples": {"count": count, "cites": [{"source": "https://zenodo.org/records/3835", "level": "primary",
                                                   "quote": quote, **({"note": note} if note else {})}]}}


def test_a_count_of_items_beside_a_different_image_count_is_flagged():
    items = manifest(samples(456, "Ultrasound planes from five African countries (456 items, totalling 55.7 MB)",
                             "The tree lists 451 files, 450 of them images."))
    assert count_rests_on_items(items) == [
        "blood_cells: evidence.samples.count 456 is a figure of items or files, while the evidence lists 450 images; "
        "count the images"]
    assert count_rests_on_items(manifest(samples(450, "450 images in five folders"))) == []
    # the items are the image files themselves (a listing of *.jpg): nothing to mend
    assert count_rests_on_items(manifest(samples(364, "BloodImage_00XYZ.jpg (364 items)", "364 images"))) == []


def repo_cite(path: str, commit: str = "fb45b349f21faa4b65ad23089788bbea30d07d74") -> dict:
    return {"source": f"OpenNeuroDatasets/ds004173@{commit}:{path}", "level": "primary", "quote": "x"}


def test_a_git_annex_branch_file_cited_at_a_work_tree_commit_is_flagged():
    wrong = manifest({"host": [repo_cite("remote.log"), repo_cite("dataset_description.json")]})
    assert annex_branch_citations([wrong]) == [
        "blood_cells: openneurodatasets/ds004173@fb45b349f21f:remote.log lives on the git-annex branch, but "
        "fb45b349f21f is a work-tree commit (it holds dataset_description.json); cite the git-annex branch's commit"]
    annex_commit = "0123456789abcdef0123456789abcdef01234567"
    right = manifest({"host": [repo_cite("remote.log", annex_commit), repo_cite("dataset_description.json")]})
    assert annex_branch_citations([right]) == []
    assert annex_branch_citations([manifest({"host": [repo_cite("logs/train.log")]})]) == []


def test_a_licence_quoted_about_a_code_project_for_data_hosted_elsewhere_is_flagged():
    code = manifest({"licence": [{"source": "Vadori/cytoark@13c7ebc5c3f732536342b3cd5f110b73d9e99e2a:README.md",
                                  "level": "secondary", "quote": "This project is licensed under the CC BY-NC-SA 4.0"}],
                     "licence_single_listing": True})
    assert len(code_licence_for_data(code)) == 1 and "speaks of a code project" in code_licence_for_data(code)[0]
    data = manifest({"licence": [{"source": "Vadori/cytoark@13c7ebc5c3f732536342b3cd5f110b73d9e99e2a:README.md",
                                  "level": "secondary", "quote": "The dataset is licensed under CC BY-NC-SA 4.0"}],
                     "licence_single_listing": True})
    assert code_licence_for_data(data) == []
    hosted_in_the_repo = manifest(
        {"licence": [{"source": "someorg/cells@0123abc:LICENSE", "level": "primary", "quote": "This repository is "
                      "licensed under CC BY 4.0"}]},
        source={"kind": "url", "files": [{"url": "https://github.com/someorg/cells/raw/main/cells.zip"}]})
    assert code_licence_for_data(hosted_in_the_repo) == []


def test_a_file_key_no_citation_quotes_is_flagged():
    unread = manifest(source={"kind": "zenodo", "record": 3835, "files": ["fundus.zip"]})
    assert unquoted_file_keys(unread) == [
        "blood_cells: source file 'fundus.zip' is quoted by no host or layout citation; quote where it was read"]
    quoted = manifest({"layout": [{"source": "https://zenodo.org/records/3835", "level": "primary",
                                   "quote": "fundus.zip 1.2 GB"}]},
                      source={"kind": "zenodo", "record": 3835, "files": ["fundus.zip"]})
    assert unquoted_file_keys(quoted) == []
    assert set(audit_findings([unread, quoted])) == {"count_rests_on_items", "code_licence_for_data",
                                                     "unquoted_file_keys", "annex_branch_citations"}
