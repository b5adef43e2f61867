"""Reviewer files: bad criteria, conflicting duplicates, consensus rules and agreement statistics."""
import pytest
from click.testing import CliRunner

from mmbu.cli import cli
from mmbu.curation.review.agreement import agreement
from mmbu.curation.review.consensus import round_outcome
from mmbu.curation.review.ledger import load_ledger
from mmbu.curation.review.model import Review
from mmbu.curation.review.rules import RulesError, load_rules



def make_review(reviewer, ref, decision, role="annotator", round_=2, fail=()):
    return Review(reviewer=reviewer, role=role, round=round_, candidate=ref, decision=decision,
                  verdicts={c: ("fail" if c in fail else "pass") for c in load_rules().criteria})


def test_unknown_criterion_and_conflicting_duplicates_are_named_and_the_rest_counts(tree, write_review):
    rules = load_rules()
    bad = write_review(tree, "alice", 2, "zenodo:11012345", "accept")
    bad.write_text(bad.read_text().replace("in-scope: pass", "in-scope: pass\n  pretty-colours: pass"))
    write_review(tree, "bob", 2, "zenodo:11012345", "accept")
    write_review(tree, "bob", 2, "zenodo:11012345", "reject", name="bob-again.yaml")
    write_review(tree, "carol", 2, "zenodo:11012345", "accept")
    write_review(tree, "carol", 2, "zenodo:11012345", "accept", name="carol-copy.yaml")  # same decision: fine
    write_review(tree, "dave", 2, "zenodo:99", "accept")
    write_review(tree, "dave", 2, "zenodo:11020002", "accept")
    ledger = load_ledger(tree / "reviews", tree / "candidates", rules)

    problems = "\n".join(ledger.problems)
    assert f"{bad}: field verdicts.pretty-colours: unknown criterion" in problems
    assert "reviewer bob already decided zenodo:11012345 in round 2 differently in" in problems
    assert "bob-again.yaml" in problems and "neither counts" in problems
    assert "candidate zenodo:99 is in no candidates file" in problems
    assert "candidate zenodo:11020002 was excluded by screening (contaminated)" in problems
    assert sorted(r.reviewer for r in ledger.reviews_for("zenodo:11012345", 2)) == ["carol"]

    result = CliRunner().invoke(cli, ["review", "queue", "--reviews", str(tree / "reviews"),
                                                      "--candidates", str(tree / "candidates")])
    assert result.exit_code == 1 and "pretty-colours" in result.stderr and "Traceback" not in result.stderr


def test_missing_verdict_and_bad_yaml_are_reported(tree, write_review):
    path = write_review(tree, "erin", 2, "kaggle:u/cells", "accept")
    path.write_text(path.read_text().replace("  clear-images: pass\n", ""))
    broken = tree / "reviews" / "round2" / "broken.yaml"
    broken.write_text("reviewer: [unclosed\n")
    ledger = load_ledger(tree / "reviews", tree / "candidates", load_rules())
    assert any("field verdicts.clear-images: no verdict given" in p for p in ledger.problems)
    assert any(str(broken) in p and "not valid YAML" in p for p in ledger.problems)


@pytest.mark.parametrize("reviews, status, reason", [
    ([("a", "accept")], "pending", "1 of 2 reviewers"),
    ([("a", "accept"), ("b", "accept")], "accepted", "2 of 2"),
    ([("a", "accept"), ("b", "reject")], "rejected", "only 1 of 2"),
    ([("a", "accept"), ("b", "reject"), ("c", "accept")], "accepted", "2 of 3"),
])
def test_round_2_majority(reviews, status, reason):
    outcome = round_outcome([make_review(n, "zenodo:1", d) for n, d in reviews], load_rules().round(2))
    assert outcome.status == status and reason in outcome.reason


def test_round_3_needs_an_expert_and_vetoes_win():
    rule = load_rules().round(3)
    assert round_outcome([make_review("a", "zenodo:1", "accept", round_=3)], rule).status == "pending"
    assert round_outcome([make_review("x", "zenodo:1", "accept", role="expert", round_=3)], rule).status == "accepted"
    vetoed = round_outcome([make_review("x", "zenodo:1", "accept", role="expert", round_=3, fail=("public-with-clear-licence",))], rule)
    assert vetoed.status == "rejected" and "public-with-clear-licence" in vetoed.reason


def test_cohen_kappa_for_two_reviewers():
    # 10 items: both accept 4, both reject 3, a-accept/b-reject 2, a-reject/b-accept 1 -> po 0.7, pe 0.5
    pairs = [("accept", "accept")] * 4 + [("reject", "reject")] * 3 + [("accept", "reject")] * 2 + [("reject", "accept")]
    reviews = [make_review(name, f"zenodo:{i}", decision) for i, pair in enumerate(pairs) for name, decision in zip("ab", pair)]
    result = agreement(reviews)
    assert result.method == "cohen" and result.items == 10 and result.kappa == pytest.approx(0.4)


def test_fleiss_kappa_for_three_reviewers():
    # per item: aaa, aar, rrr, arr -> P-bar 2/3, Pe 1/2, kappa 1/3
    items = ["aaa", "aar", "rrr", "arr"]
    word = {"a": "accept", "r": "reject"}
    reviews = [make_review(name, f"zenodo:{i}", word[letter]) for i, item in enumerate(items) for name, letter in zip("xyz", item)]
    result = agreement(reviews)
    assert result.method == "fleiss" and result.raters == 3 and result.kappa == pytest.approx(1 / 3)
    assert agreement(reviews, "in-scope").kappa is None  # every verdict "pass": undefined, said so


def test_agreement_command_prints_a_table(tree, write_review):
    for i, ref in enumerate(["zenodo:11012345", "huggingface:org/skin", "kaggle:u/cells"]):
        write_review(tree, "alice", 2, ref, "accept")
        write_review(tree, "bob", 2, ref, "accept" if i else "reject")
    result = CliRunner().invoke(cli, ["review", "agreement", "--reviews", str(tree / "reviews"),
                                      "--candidates", str(tree / "candidates")])
    assert result.exit_code == 0 and "cohen" in result.output and "decision" in result.output


def test_invalid_rules_file_exits_2(tmp_path, tree):
    rules = tmp_path / "rules.yaml"
    rules.write_text("criteria: {a: b}\nrounds: {2: {name: x, description: y, veto_criteria: [zzz]}, 3: {name: x, description: y}}\n")
    with pytest.raises(RulesError, match="veto_criteria: unknown criterion 'zzz'"):
        load_rules(rules)
    result = CliRunner().invoke(cli, ["review", "status", "--rules", str(rules), "--reviews", str(tree / "reviews")])
    assert result.exit_code == 2 and "zzz" in result.output
