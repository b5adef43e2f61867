"""Per-dataset trail files (manifests/reviews/catalogue/<id>.yaml): nomination, reviews and rejection in one file,
read by the same ledger as reviewer files, and shown by `mmbu review status` as a funnel with reasons."""
from __future__ import annotations

import yaml
from click.testing import CliRunner

from mmbu.cli import cli
from mmbu.curation.review.ledger import load_ledger
from mmbu.curation.review.rules import load_rules
from mmbu.curation.review.trail import all_trails

PASS = {c: "pass" for c in ("public-with-clear-licence", "clear-images", "human-made-labels", "not-contaminated",
                            "in-scope")}


def trail_file(root, stem, **fields):
    document = {"ref": f"nominated:{stem}", "title": stem.replace("_", " "), "url": f"https://lab.example.org/{stem}",
                "nominated_by": "catalogue-lead", **fields}
    path = root / "reviews" / "catalogue" / f"{stem}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    return path


def annotator(name, decision="accept", round_=2, **verdicts):
    return {"reviewer": name, "role": "annotator", "round": round_, "decision": decision,
            "verdicts": {**PASS, **verdicts}}


def status(root):
    args = ["review", "status", "--reviews", str(root / "reviews"), "--candidates", str(root / "candidates"),
            "--datasets", str(root / "datasets")]
    return CliRunner(env={"COLUMNS": "250"}).invoke(cli, args, catch_exceptions=False)


def trails(root):
    rules = load_rules()
    ledger = load_ledger(root / "reviews", root / "candidates", rules)
    return ledger, {t.ref: t for t in all_trails(ledger, rules, root / "datasets")}


def test_trail_files_give_the_funnel_and_the_reasons(tmp_path):
    root = tmp_path / "manifests"
    (root / "datasets").mkdir(parents=True)
    (root / "datasets" / "bccd.yaml").write_text("id: bccd\n")  # only its presence matters to the trail
    trail_file(root, "bccd", origin="search", manifest="bccd", reviews=[annotator("catalogue-lead")])
    trail_file(root, "knee", origin="mmbu-named", manifest="knee",
               reviews=[annotator("catalogue-lead"), annotator("catalogue-micro")])
    trail_file(root, "kvasir_seg", origin="search", reviews=[annotator("catalogue-lead", "reject")],
               rejection={"reason": "licence-not-a-licence", "quote": "free for academic and research purposes",
                          "source": "DebeshJha/Kvasir-SEG@0123abc:README.md"})
    trail_file(root, "scdb", origin="mmbu-named",
               rejection={"reason": "not-identifiable", "quote": "scdb | cls | dermoscopy | unknown",
                          "source": "repo:manifests/README.md"})

    ledger, found = trails(root)
    assert not ledger.problems
    assert set(ledger.nominations) == {"nominated:bccd", "nominated:knee", "nominated:kvasir_seg", "nominated:scdb"}
    assert (found["nominated:bccd"].stage, found["nominated:bccd"].status) == ("round 2", "pending")
    assert found["nominated:bccd"].manifest.endswith("bccd.yaml")
    assert found["nominated:knee"].passed("round 2") and found["nominated:knee"].manifest is None
    assert found["nominated:knee"].origin[0] == "mmbu-named"
    kvasir = found["nominated:kvasir_seg"]
    assert (kvasir.stage, kvasir.status, kvasir.rejection) == ("round 2", "rejected", "licence-not-a-licence")
    assert "free for academic and research purposes" in kvasir.reason and "DebeshJha/Kvasir-SEG" in kvasir.reason
    assert (found["nominated:scdb"].stage, found["nominated:scdb"].status) == ("screening", "excluded")

    result = status(root)
    assert result.exit_code == 0, result.output
    rows = {line.split("│")[1].strip(): line.split("│")[2].strip() for line in result.stdout.splitlines()
            if line.startswith("│") and len(line.split("│")) == 4}
    assert rows["nominated (round 1)"] == "4" and rows["after screening"] == "3" and rows["after round 2"] == "1"
    assert rows["in manifests/datasets (promoted or named by a trail file)"] == "1"
    assert "licence-not-a-licence" in result.stdout and "not-identifiable" in result.stdout
    assert "waiting: fewer than 2 reviewers have decided" in result.stdout
    assert "4 → 4 → 1 → 0" in result.stdout


def test_bad_trail_files_are_reported_one_sentence_each_and_the_rest_load(tmp_path):
    root = tmp_path / "manifests"
    good = trail_file(root, "good", manifest="good", reviews=[annotator("a")])
    trail_file(root, "wrong_stem", manifest="other_name")
    trail_file(root, "bad_reason", rejection={"reason": "too-big", "quote": "x", "source": "https://a.example.org/x"})
    trail_file(root, "bad_source", rejection={"reason": "contaminated", "quote": "x", "source": "somewhere"})
    trail_file(root, "both", manifest="both", rejection={"reason": "contaminated", "quote": "x",
                                                         "source": "https://a.example.org/x"})
    trail_file(root, "no_verdict", reviews=[{"reviewer": "a", "round": 2, "decision": "accept",
                                             "verdicts": {"clear-images": "pass"}}])
    duplicate = trail_file(root, "good_again", ref="nominated:good")
    duplicate.write_text(duplicate.read_text().replace("nominated:good_again", "nominated:good"))

    ledger, found = trails(root)
    text = "\n".join(ledger.problems)
    assert "wrong_stem.yaml: field manifest: 'other_name' must equal the file name stem" in text
    assert "bad_reason.yaml: field rejection.reason: 'too-big' is not one of" in text
    assert "bad_source.yaml: field rejection.source" in text and "not a source reference" in text
    assert "both.yaml" in text and "keep one" in text
    assert "no_verdict.yaml: field reviews.0.verdicts.public-with-clear-licence: no verdict given" in text
    assert "good_again.yaml: field ref: nominated:good already has the trail file" in text and str(good) in text
    assert len(ledger.problems) == 6 and set(found) == {"nominated:good"}
    result = status(root)
    assert result.exit_code == 1 and "warning:" in result.stderr


def test_a_reviewer_file_and_a_trail_file_disagreeing_is_a_conflict(tmp_path):
    root = tmp_path / "manifests"
    trail_file(root, "cells", reviews=[annotator("alice")])
    other = root / "reviews" / "round2" / "cells" / "alice.yaml"
    other.parent.mkdir(parents=True)
    other.write_text(yaml.safe_dump({"candidate": "nominated:cells", **annotator("alice", "reject")}))
    ledger, found = trails(root)
    assert any("already decided nominated:cells in round 2 differently" in p for p in ledger.problems)
    assert found["nominated:cells"].status == "pending"
