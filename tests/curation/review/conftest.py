"""A tmp copy of the manifests tree with discover output, nominations and a draft manifest for the review tests."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from mmbu.curation.sources.candidate import Candidate

DRAFT_PATH = Path(__file__).parent / "data" / "chest-draft.yaml"
DRAFT = yaml.safe_load(DRAFT_PATH.read_text())


def candidate(source: str, id: str, title: str, **fields) -> dict:
    record = Candidate(source=source, id=id, title=title, url=f"https://example.org/{source}/{id}",
                       license=fields.pop("license", "CC-BY-4.0"), **fields)
    return record.model_dump(mode="json")


@pytest.fixture
def tree(tmp_path) -> Path:
    """tmp/manifests/{candidates,reviews,datasets} as `mmbu discover` and the reviewers would leave them."""
    root = tmp_path / "manifests"
    for name in ("candidates", "reviews", "datasets", "reviews/drafts"):
        (root / name).mkdir(parents=True)
    excluded = candidate("zenodo", "11020002", "PathVQA images re-release", flags=["contaminated"], excluded=True,
                         reasons=["contaminated: its title names PathVQA (PathVQA: pathology VQA benchmark)"])
    rows = [candidate("zenodo", "11012345", DRAFT["title"]), candidate("huggingface", "org/skin", "Skin photos"),
            candidate("kaggle", "u/cells", "Cell images"), excluded]
    (root / "candidates" / "run-1.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    nominations = {"nominations": [
        {"ref": "zenodo:11012345", "title": DRAFT["title"], "url": "https://zenodo.org/records/11012345",
         "nominated_by": "dr-expert", "note": "radiologist masks"},
        {"ref": "nominated:local-histology-set", "title": "A histology set at a lab site", "url": "https://lab.example.org/set",
         "nominated_by": "dr-expert"}]}
    (root / "reviews" / "nominations.yaml").write_text(yaml.safe_dump(nominations))
    (root / "reviews" / "drafts" / "chest.yaml").write_text(DRAFT_PATH.read_text())
    return root


CRITERIA = ["public-with-clear-licence", "clear-images", "human-made-labels", "not-contaminated", "in-scope"]


@pytest.fixture
def write_review():
    """write_review(root, reviewer, round, ref, decision, role=..., fail=(criteria...), name=..., **fields) -> path"""
    return _write_review


def _write_review(root: Path, reviewer: str, round_: int, ref: str, decision: str, role: str = "annotator",
                 fail: tuple[str, ...] = (), name: str | None = None, **extra) -> Path:
    verdicts = {c: ("fail" if c in fail else "pass") for c in CRITERIA}
    document = {"reviewer": reviewer, "role": role, "round": round_, "candidate": ref, "verdicts": verdicts,
                "decision": decision, "note": f"{reviewer} on {ref}", **extra}
    path = root / "reviews" / f"round{round_}" / ref.replace(":", "-").replace("/", "-") / (name or f"{reviewer}.yaml")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path
