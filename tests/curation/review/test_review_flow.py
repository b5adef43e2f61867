"""A candidate goes through rounds 2 and 3 by adding reviewer files and lands in manifests/datasets/."""
import json

import yaml
from click.testing import CliRunner

from mmbu.cli import cli
from mmbu.curation.manifest import load_manifest
from mmbu.curation.manifest.validate import validate_files
from mmbu.taxonomy.model import load_taxonomy



def review(root, *args, checks=None):
    base = ["review", args[0], "--reviews", str(root / "reviews"), "--candidates", str(root / "candidates"),
            "--datasets", str(root / "datasets")]
    if checks:
        base += ["--checks", str(checks)]
    return CliRunner(env={"COLUMNS": "250"}).invoke(cli, [*base, *args[1:]], catch_exceptions=False)


def funnel_rows(output):
    return {line.split("│")[1].strip(): int(line.split("│")[2]) for line in output.splitlines()
            if line.startswith("│") and line.split("│")[2].strip().isdigit()}


def test_round_2_then_round_3_promotes_a_valid_manifest(tree, tmp_path, write_review):
    ref = "zenodo:11012345"
    for name in ("alice", "bob", "carol"):
        write_review(tree, name, 2, ref, "accept")
    write_review(tree, "alice", 2, "huggingface:org/skin", "accept")
    write_review(tree, "bob", 2, "huggingface:org/skin", "reject", fail=("in-scope",))
    write_review(tree, "carol", 2, "huggingface:org/skin", "reject")
    write_review(tree, "alice", 2, "kaggle:u/cells", "accept")
    write_review(tree, "bob", 2, "kaggle:u/cells", "accept")
    write_review(tree, "carol", 2, "kaggle:u/cells", "accept", fail=("not-contaminated",))  # a veto

    queue = review(tree, "queue")
    assert queue.exit_code == 0, queue.stderr
    assert ref in queue.stdout and "round 3" in queue.stdout and "0 of 1 reviewers have decided" in queue.stdout

    write_review(tree, "dr-expert", 3, ref, "accept", role="expert", draft_manifest="../../drafts/chest.yaml")
    blocked = review(tree, "promote")
    assert "promoted" not in blocked.stdout.replace("promoted in all", "")
    assert not (tree / "datasets" / "chest_pneumothorax_demo.yaml").exists()  # checks not passed yet

    checks = tmp_path / "checks.jsonl"
    checks.write_text("".join(json.dumps({"dataset_id": "chest_pneumothorax_demo", "check": c, "ok": True,
                                          "detail": "ok"}) + "\n" for c in ("fetches", "files-open", "labels-complete")))
    result = review(tree, "promote", checks=checks)
    assert result.exit_code == 0, result.stderr
    promoted = tree / "datasets" / "chest_pneumothorax_demo.yaml"
    assert f"promoted {ref} -> {promoted}" in result.stdout

    manifest = load_manifest(promoted)
    assert validate_files([promoted], load_taxonomy()).ok
    assert manifest.curation.round == 3 and manifest.curation.nominated_by == "dr-expert"
    assert manifest.curation.reviewers == ["alice", "bob", "carol", "dr-expert"]
    assert [e.decision for e in manifest.curation.history] == ["nominated", "accepted", "accepted", "promoted"]
    assert manifest.labels["drain"] == "chest drain in place"  # extra content comes from the draft

    audit = {row["ref"]: row for row in map(json.loads, (tree / "reviews" / "audit.jsonl").read_text().splitlines())}
    assert audit[ref]["status"] == "promoted"
    assert audit["zenodo:11020002"]["status"] == "excluded" and "PathVQA" in audit["zenodo:11020002"]["reason"]
    assert audit["huggingface:org/skin"]["status"] == "rejected" and "1 of 3" in audit["huggingface:org/skin"]["reason"]
    assert audit["kaggle:u/cells"]["reason"] == "veto: carol marked not-contaminated as fail"
    assert audit["nominated:local-histology-set"]["stage"] == "round 2"
    assert audit["nominated:local-histology-set"]["status"] == "pending"

    status = review(tree, "status", checks=checks)
    assert funnel_rows(status.stdout) == {
        "nominated (round 1)": 2, "candidates (nominated + discovered)": 5, "after screening": 4,
        "after round 2": 1, "after round 3": 1, "promoted to manifests/datasets": 1,
        "in manifests/datasets (promoted or named by a trail file)": 1}
    assert "2 → 5 → 1 → 1" in status.stdout


def test_failing_checks_keep_it_in_round_3_with_the_reason(tree, tmp_path, write_review):
    ref = "zenodo:11012345"
    for name in ("alice", "bob"):
        write_review(tree, name, 2, ref, "accept")
    write_review(tree, "dr-expert", 3, ref, "accept", role="expert", draft_manifest="../../drafts/chest.yaml")
    checks = tmp_path / "checks.jsonl"
    checks.write_text(json.dumps({"dataset_id": "chest_pneumothorax_demo", "check": "files-open", "ok": False,
                                  "detail": "images/normal/3.png: truncated PNG"}) + "\n" + "not json\n")
    result = review(tree, "audit", checks=checks)
    assert result.exit_code == 1 and "checks.jsonl: line 2: not a check result" in result.stderr
    row = next(r for r in map(json.loads, (tree / "reviews" / "audit.jsonl").read_text().splitlines()) if r["ref"] == ref)
    assert row["stage"] == "round 3" and row["status"] == "pending"
    assert "files-open: images/normal/3.png: truncated PNG" in row["reason"]
    assert row["checks"]["licence-clear"] == {"ok": True, "detail": "CC-BY-4.0"}


def test_a_draft_that_fails_validation_is_not_promoted(tree, tmp_path, write_review):
    ref = "zenodo:11012345"
    draft = yaml.safe_load((tree / "reviews" / "drafts" / "chest.yaml").read_text())
    draft["metadata"]["sub_modality"] = "not a real sub-modality"
    (tree / "reviews" / "drafts" / "chest.yaml").write_text(yaml.safe_dump(draft))
    for name in ("alice", "bob"):
        write_review(tree, name, 2, ref, "accept")
    write_review(tree, "dr-expert", 3, ref, "accept", role="expert", draft_manifest="../../drafts/chest.yaml")
    checks = tmp_path / "checks.jsonl"
    checks.write_text("".join(json.dumps({"dataset_id": "chest_pneumothorax_demo", "check": c, "ok": True}) + "\n"
                              for c in ("fetches", "files-open")))
    result = review(tree, "promote", checks=checks)
    assert result.exit_code == 1
    assert "chest.yaml: field metadata.sub_modality" in result.stderr and "(not promoted)" in result.stderr
    assert list((tree / "datasets").iterdir()) == []
