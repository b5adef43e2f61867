"""The whole curation path: `mmbu discover` output, reviewer files for rounds 2 and 3, promotion, funnel."""
import json
import shutil
from pathlib import Path

import yaml
from click.testing import CliRunner

from mmbu.cli import cli
from mmbu.curation.manifest.validate import validate_files
from mmbu.taxonomy.model import load_taxonomy

DRAFT = Path(__file__).parents[1] / "review" / "data" / "chest-draft.yaml"
CRITERIA = ["public-with-clear-licence", "clear-images", "human-made-labels", "not-contaminated", "in-scope"]


def reviewer_file(folder: Path, reviewer: str, round_: int, ref: str, role: str = "annotator", **extra) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    document = {"reviewer": reviewer, "role": role, "round": round_, "candidate": ref,
                "verdicts": dict.fromkeys(CRITERIA, "pass"), "decision": "accept", **extra}
    (folder / f"{reviewer}.yaml").write_text(yaml.safe_dump(document))


def test_a_discovered_candidate_is_reviewed_and_promoted(apis, tmp_path, taxonomy_path):
    manifests = tmp_path / "manifests"
    (manifests / "datasets").mkdir(parents=True)
    out = manifests / "candidates" / "run-1.jsonl"
    runner = CliRunner(env={"COLUMNS": "200"})
    found = runner.invoke(cli, ["discover", "--out", str(out), "--taxonomy", str(taxonomy_path), "--max-queries", "12",
                                "--sources", "zenodo", "--accepted-dir", str(manifests / "datasets"),
                                "--cache", str(tmp_path / "cache"), "--rate", "200"])
    assert found.exit_code == 0, found.output
    ref = "zenodo:11012345"
    assert ref in {f"{c['source']}:{c['id']}" for c in map(json.loads, out.read_text().splitlines())}

    reviews = manifests / "reviews"
    for name in ("alice", "bob"):
        reviewer_file(reviews / "round2" / "zenodo-11012345", name, 2, ref)
    (reviews / "drafts").mkdir()
    shutil.copy(DRAFT, reviews / "drafts" / "chest.yaml")  # drafts/ holds manifests, not reviewer files
    reviewer_file(reviews / "round3" / "zenodo-11012345", "dr-expert", 3, ref, role="expert",
                  draft_manifest="../../drafts/chest.yaml")
    checks = tmp_path / "build-checks.jsonl"
    checks.write_text("".join(json.dumps({"dataset_id": "chest_pneumothorax_demo", "check": c, "ok": True}) + "\n"
                              for c in ("fetches", "files-open", "labels-complete")))

    args = ["--reviews", str(reviews), "--candidates", str(manifests / "candidates"),
            "--datasets", str(manifests / "datasets"), "--checks", str(checks)]
    promoted = runner.invoke(cli, ["review", "promote", *args])
    assert promoted.exit_code == 0, promoted.output
    manifest = manifests / "datasets" / "chest_pneumothorax_demo.yaml"
    assert validate_files([manifest], load_taxonomy()).ok

    status = runner.invoke(cli, ["review", "status", *args])
    assert status.exit_code == 0 and "0 → 10 → 1 → 1" in status.output  # 6 dataset + 4 image records; one made it
