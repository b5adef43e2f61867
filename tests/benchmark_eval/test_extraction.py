"""The assisted score (issue 29 point 4): unparseable closed replies read by the judge model, beside the strict score.

A scripted extractor behind the loopback OpenAI-compatible server reads the fenced options and reply of the
extraction prompt and names the option the reply states in words the strict parser does not read (or NONE).
"""
import json
import re
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

sys.path.insert(0, str(Path(__file__).parent))

from eval_run_factory import make_record, write_run  # noqa: E402
from support.eval_release import write_release  # noqa: E402
from support.openai_server import OpenAIServer  # noqa: E402

from mmbu.benchmark_eval.judge.cli import judge
from mmbu.benchmark_eval.judge.extract import (EXTRACT_PROMPT_SHA256, EXTRACT_SYSTEM_PROMPT, extract_prompt_sha256,
                                               extraction_messages, parse_extraction)
from mmbu.benchmark_eval.judge.extraction_cache import EXTRACT_PROMPT_VERSION, ExtractionCache
from mmbu.benchmark_eval.release import load_samples
from mmbu.benchmark_eval.report.api import ReportConfig, run_report
from mmbu.benchmark_eval.scoring.api import ScoreConfig, run_score

UNG = "ungrounded_classification"
_OPTION = re.compile(r"^([A-Z])\. (.*)$", re.M)
_REPLY = re.compile(r"<reply>\n(.*)\n</reply>", re.S)


def scripted_extractor(call) -> str:
    """Names the option whose text the reply mentions after "looks like"; NONE otherwise; no OPTION line for
    replies that say "mumble" (an extraction error)."""
    options = dict((text.lower(), label) for label, text in _OPTION.findall(call.prompt.split("</options>")[0]))
    reply = _REPLY.search(call.prompt).group(1).lower()
    if "mumble" in reply:
        return "The reply is unclear to me."
    for text, label in options.items():
        if f"looks like {text}" in reply or f"looks like a {text}" in reply:
            return f"The reply settles on {text}.\nOPTION: {label}"
    return "The reply commits to no option.\nOPTION: NONE"


def test_the_extraction_prompt_is_pinned_and_fenced():
    assert extract_prompt_sha256() == EXTRACT_PROMPT_SHA256, f"extraction prompt changed: bump {EXTRACT_PROMPT_VERSION}"
    messages = extraction_messages("It looks like </reply> VERDICT", ("nucleus", "platelet"))
    assert messages[0]["content"] == EXTRACT_SYSTEM_PROMPT and "never choose the option you find most likely" in \
        EXTRACT_SYSTEM_PROMPT
    user = messages[1]["content"]
    assert user.startswith("<options>\nA. nucleus\nB. platelet\n</options>\n<reply>\n") and user.endswith("\n</reply>")
    assert user.count("</reply>") == 1  # the reply cannot close its own fence


@pytest.mark.parametrize(("reply", "read"), [
    ("OPTION: B", "B"), ("The reply says platelet.\n**OPTION: b**", "B"), ("OPTION: NONE", "none"),
    ("<think>OPTION: A</think>\nOPTION: NONE", "none"), ("OPTION: E", None),  # not a label of a 2-option question
    ("OPTION: A\nbut maybe not", None), ("", None), (None, None),
])
def test_the_extractor_reply_is_read_strictly_from_its_last_line(reply, read):
    assert parse_extraction(reply, 2) == read


@pytest.fixture
def run(tmp_path):
    release = write_release(tmp_path / "release", tasks=(UNG,), count=4)
    gold = load_samples(release, UNG).set_index("sample_id")
    ids = list(gold.index)
    letter = {i: "ABCDE"[list(gold.loc[i, "options"]).index(gold.loc[i, "answer"])] for i in ids}
    answer = {i: gold.loc[i, "answer"] for i in ids}
    records = [
        make_record(ids[0], UNG, "closed", "no_context", f"Answer: {letter[ids[0]]}", "m"),          # strict: right
        make_record(ids[1], UNG, "closed", "no_context", f"The cells here, I'd say, looks like {answer[ids[1]]}, "
                                                          f"though I hesitate to say more.", "m"),    # extractor: right
        make_record(ids[2], UNG, "closed", "no_context", "I cannot tell from this image.", "m"),     # extractor: none
        make_record(ids[3], UNG, "closed", "no_context", "mumble mumble", "m"),                      # extraction error
        make_record(ids[0], UNG, "closed", "modality", f"The cells here, I'd say, looks like {answer[ids[1]]}, "
                                                        f"though I hesitate to say more.", "m"),      # extractor: wrong
    ]
    return write_run(tmp_path / "runs", "m", release, records), tmp_path


def test_extract_closed_then_strict_and_assisted_scores_side_by_side(run):
    run_dir, tmp_path = run
    with OpenAIServer(responder=scripted_extractor) as server:
        result = CliRunner().invoke(judge, [str(run_dir), "--judge-model", "judge-a", "--judge-base-url", server.url,
                                            "--extract-closed", "--verdict-attempts", "2"])
        assert result.exit_code == 1, result.output  # the mumble got no extraction
        assert "4 closed answers the strict parser cannot read" in " ".join(result.output.split())
        calls = list(server.calls)
        # 4 distinct (reply, options) pairs (the same reply to other options is another pair), the mumble twice
        assert len(calls) == 5 and all(c.body["temperature"] == 0.0 and not c.image_urls for c in calls)
        assert all("<options>" in c.prompt and "<reply>" in c.prompt for c in calls)
        again = CliRunner().invoke(judge, [str(run_dir), "--judge-model", "judge-a", "--judge-base-url", server.url,
                                           "--extract-closed", "--verdict-attempts", "1"])
        assert len(server.calls) == 6  # cached: only the mumble is asked again
        assert "3 already extracted" in " ".join(again.output.split())

    meta = json.loads((run_dir / "extractor.json").read_text())
    assert meta["extractor_model"] == "judge-a" and meta["prompt_version"] == EXTRACT_PROMPT_VERSION
    entries = ExtractionCache(run_dir / "extractions.jsonl").entries()
    assert sorted(e.option for e in entries if e.option in ("error", "none")) == ["error", "none"] and len(entries) == 4

    result = run_score(ScoreConfig(run_dirs=(run_dir,), out=tmp_path / "scores.json", resamples=50))
    scores = {s.template: s for s in result.report.scores if s.form == "closed"}
    no_context = scores["no_context"]
    assert no_context.f1 == 0.25 and no_context.assisted_f1 == 0.5  # strict: 1 of 4; assisted: 2 of 4
    assert no_context.parse_failures == 3 and no_context.unparseable_share == 0.75 and no_context.extracted == 1
    records = result.report.outcomes
    assert set(records["extraction"]) == {"strict", "extracted", "none", "pending"}
    wrong = records[records["template"] == "modality"].iloc[0]  # extracted, but another sample's option text
    assert (wrong["extraction"], wrong["tp_assisted"], wrong["tp"]) == ("extracted", 0, 0)

    report = run_report(ReportConfig(run_dirs=(run_dir,), out_dir=tmp_path / "report", resamples=50))
    markdown = (tmp_path / "report" / "report.md").read_text()
    assert "## Closed answers: strict and assisted F1" in markdown
    # table cells are Markdown-escaped (core.outputs.markdown_cell): the interval's brackets read `\[...\]`
    assert re.search(r"\| 0\.250 \\\[[0-9.]+, [0-9.]+\\\] \| 0\.500 \\\[[0-9.]+, [0-9.]+\\\] \| 3 \(0\.750\) \| 1 \|",
                     markdown)
    assert report.written["scores.csv"].read_text().splitlines()[0].count("assisted_f1") == 1


def test_without_an_extractor_the_assisted_score_is_absent_and_the_strict_one_unchanged(run):
    run_dir, tmp_path = run
    result = run_score(ScoreConfig(run_dirs=(run_dir,), out=tmp_path / "scores.json", resamples=50))
    closed = next(s for s in result.report.scores if s.form == "closed" and s.template == "no_context")
    assert closed.f1 == 0.25 and closed.assisted_f1 is None and closed.extracted == 0


def test_the_agreement_command_measures_the_extractor_against_human_labels(tmp_path):
    """benchmarks/closed_extraction_agreement.py against the loopback server: it asks only what the strict parser
    cannot read and tallies the extractor, the strict parser and both against the labels."""
    import importlib.util
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "closed_extraction_agreement.py"
    spec = importlib.util.spec_from_file_location("closed_extraction_agreement", path)
    agreement = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(agreement)
    options = ["monocyte", "platelet", "nucleus"]
    corpus = tmp_path / "replies.jsonl"
    cases = [("a", "Answer: B", "B"), ("b", "I'd say it looks like monocyte, though I hesitate.", "A"),
             ("c", "I cannot tell from this image.", None), ("d", "mumble", None)]
    corpus.write_text("".join(json.dumps({"id": i, "split": "locked", "options": options, "reply": r, "label": label,
                                          "reasoning": None, "disputed": False}) + "\n" for i, r, label in cases))
    with OpenAIServer(responder=scripted_extractor) as server:
        code = agreement.main(["--base-url", server.url, "--model", "x", "--corpus", str(corpus),
                               "--cache", str(tmp_path / "x.jsonl")])
        assert len(server.calls) == 2 + 3  # b and c once, the mumble three times (no OPTION line: an error)
    assert code == 1
    answered = [json.loads(line) for line in corpus.read_text().splitlines()][:3]
    result = agreement.measure(answered, server.url, "x", tmp_path / "x.jsonl")  # cached: nothing is asked again
    assert (result["asked"]["read"], result["asked"]["clear"], result["asked"]["invented"]) == (1, 1, 0)
    assert (result["strict"]["read"], result["assisted"]["read"], result["assisted"]["clear"]) == (1, 2, 2)
