"""The closed parser on real model replies, labelled by hand (data/closed_replies/PROVENANCE.md).

The corpus is split by source: `development` (the sources the rules were written from) and `locked` (other
benchmarks, model families and a language the rules never saw; labelled blind and only scored). The aims
of issue 29, on each part: at least 97 % of clearly stated answers read, no wrong letter, no letter given
to a reply that states no answer. Disputed cases (a careful reader could go either way) are kept in the
corpus but not scored.
"""
import json
import re
from collections import Counter
from pathlib import Path

import pytest

from mmbu.benchmark_eval.parser import ReasoningMarkers, option_labels, parse_closed_answer

CORPUS = Path(__file__).parent / "data" / "closed_replies" / "replies.jsonl"
CASES = [json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines()]
SPLITS = ("development", "locked")
SOURCE = re.compile(r"^(?:[\w.-]+/[\w.-]+@[0-9a-f]{40}:[^#]+#\S+|https://github\.com/[\w.-]+/[\w.-]+/(?:issues|pull)/\d+)$")


def markers(case: dict) -> ReasoningMarkers:
    declared = case["reasoning"]
    if declared is None:
        return ReasoningMarkers()
    return ReasoningMarkers(tuple(tuple(pair) for pair in declared["pairs"]), declared["prefilled"])


def test_every_case_is_cited_and_well_formed():
    assert len(CASES) >= 200
    assert len({case["id"] for case in CASES}) == len(CASES)
    for case in CASES:
        assert SOURCE.match(case["source"]), case["id"]
        assert case["label"] is None or case["label"] in option_labels(len(case["options"])), case["id"]
        assert not (case["disputed"] and case["label"]), case["id"]
        assert case["split"] in SPLITS, case["id"]


def test_the_locked_part_shares_no_source_with_development():
    """Split by source, not by reply: no repository file (nor model of it) feeds both parts."""
    def origin(case):
        return case["source"].split("#")[0], case["model"]
    development = {origin(c) for c in CASES if c["split"] == "development"}
    locked = {origin(c) for c in CASES if c["split"] == "locked"}
    assert locked and not development & locked
    assert {c["source"].split("@")[0] for c in CASES if c["split"] == "locked"}.isdisjoint(
        {c["source"].split("@")[0] for c in CASES if c["split"] == "development"})
    assert {"zh", "en"} <= {c["language"] for c in CASES if c["split"] == "locked"}


def outcomes(cases: list[dict]) -> tuple[Counter, list[str]]:
    counts, failures = Counter(), []
    for case in cases:
        if case["disputed"]:
            continue
        parsed = parse_closed_answer(case["reply"], case["options"], markers(case))
        if case["label"] is None:
            counts["no_answer"] += 1
            if parsed.label is not None:
                counts["invented"] += 1
                failures.append(f"{case['id']}: no answer, read {parsed.label} by {parsed.path}")
        else:
            counts["clear"] += 1
            if parsed.label == case["label"]:
                counts["read"] += 1
            elif parsed.label is not None:
                counts["wrong"] += 1
                failures.append(f"{case['id']}: {case['label']}, read {parsed.label} by {parsed.path}")
            else:
                failures.append(f"{case['id']}: {case['label']}, missed ({parsed.path})")
    return counts, failures


# What the locked parts scored with the rules frozen (benchmarks/RESULTS.md), kept as measured, not fitted (issue 29's
# discipline): a parser change that reads any of these right, or fails on any other locked case, must say so here.
# All four parts as scored with the rules frozen at eed5111 (the fourth part, BLINK, scored once then; parts 1-3
# re-scored, their failures having been known while the development data of later rounds was chosen). First part: a
# letter given to a reply that states option A's value and then names (J). Second: two answers given as an option's
# text in replies that go on to discuss the other options ("… is delirium (D)." is now read). Third (MATH-V): a boxed
# value and an answer value without the option's unit ("\boxed{15}" for "15 m²"), SPHINX's grounded "<p>A</p>[…]",
# letters given to token salad ("a-a-a-…", "(a) (b) (c) …") and to three letters in a row ("A, b, c"). Fourth
# (BLINK, options not given by the source): "(B) no" read as a verdict against B (the placeholder options do not say
# option B's text is "no"), "the second image (A) is more likely to be …" not read, and letters given to "A\nB\nC\nD",
# "A\nB" (the last line) and to the cut-off "A is". Fifth (IgakuQA, Japanese medical licensing examinations; labelled at
# 04a3cde, scored once with the rules frozen at f24963b; parts 1-4 read as before): a lower-case letter (the source
# lower-cases the ChatGPT and GPT-4 replies) followed by a reason, a value or a paraphrase of its option rather than the option's exact
# text ("c (ﾋﾞﾀﾐﾝb6)", "a. na 154 meq/l", "b (as the question asks …)", "a: ① \"i will …\""), also after an explanation
# ("… as soon as possible.d: \"how do you understand diabetes?\""), and "c: <option text> が最も可能性が高い" after a
# refusal; no wrong letter and no letter given to the 55 non-answers.
# Sixth (Korean examinations, hsr87/evaluate-llm-on-korean-dataset; labelled at 6587635, scored once with the rules frozen
# at ab9319e): no failure (65/65 read, 0 wrong, 0/11). Parts 1-5 re-scored with those rules: ten of the fifth part's misses
# are read now ("c (ﾋﾞﾀﾐﾝb6)", "a. na 154 meq/l", …) and the fourth part's "A\nB\nC\nD" and "A\nB" get no letter; the
# fifth part's translated-ChatGPT "b (… brinkman's index would be 450 (15 x 30))." is now given B although the value it
# concludes on is option E's (the lower-case letter with a reason is read; the value check does not cover a first line).
LOCKED_FAILURES = {
    "mmlu-pro/Yi-6b-Chat/11930": "no answer, read J",
    "thoughtsource/gpt-3.5-turbo/med_qa_test_922-none": "A, missed",
    "thoughtsource/gpt-3.5-turbo/med_qa_test_254-zhou-01": "A, missed",
    "math-v/InternLM-XComposer2-VL-CoT/1590@InternLM-XComposer2-VL-CoT.jsonl": "D, missed",
    "math-v/InternLM-XComposer2-VL/1761@InternLM-XComposer2-VL.jsonl": "D, missed",
    "math-v/SPHINX-MoE/673@SPHINX-MoE.jsonl": "no answer, read A",
    "math-v/SPHINX-v2/1203@SPHINX-v2.jsonl": "no answer, read A",
    "math-v/SPHINX-v2/1650@SPHINX-v2.jsonl": "A, missed",
    "math-v/ShareGPT4V-13B/160@ShareGPT4V-13B.jsonl": "no answer, read A",
    "blink/GPT4Turbo/test_Jigsaw_53@Jigsaw.json": "A, missed",
    "blink/GPT4Turbo/test_Jigsaw_71@Jigsaw.json": "B, missed",
    "blink/OPUS/val_Spatial_Relation_114@Spatial Relation.json": "B, missed",
    "blink/OPUS/test_Spatial_Relation_69@Spatial Relation.json": "B, missed",
    "blink/QwenVLMax/test_Spatial_Relation_123@Spatial Relation.json": "B, missed",
    "blink/flamingov2/test_Spatial_Relation_129@Spatial Relation.json": "B, missed",
    "blink/instructblip_13b/val_Spatial_Relation_1@Spatial Relation.json": "B, missed",
    "blink/llava-internlm2-7b/val_Relative_Depth_47@Relative Depth.json": "no answer, read A",
    "igakuqa/gpt4/116E38@116-E_gpt4.jsonl": "C, missed",
    "igakuqa/gpt4/112A35@112-A_gpt4.jsonl": "B, missed",
    "igakuqa/gpt4/116D16@116-D_gpt4.jsonl": "C, missed",
    "igakuqa/translate_chatgpt-en/115E49@115-E_translate_chatgpt-en.jsonl": "D, missed",
    "igakuqa/translate_chatgpt-en/113C60@113-C_translate_chatgpt-en.jsonl": "no answer, read B",
}
# The one development non-answer the parser still gives a letter to: its conclusion is an existential sentence
# ("There are 4 members in the family.", option C), not a value stated as what something is; reading such
# sentences as answers was not adopted (PROVENANCE "Split by source").
# The MathVista development replies added with the rules of "=" and of a unit in the reply's own words (PROVENANCE
# "Split by source", step 8) that those rules do not read: a range with words after it ("is 11-15 years old"), "5π cm"
# for "5πcm", "1 and 4" for "1 & 4", a bolded letter after "=", a value named beside another option's, answer fields
# that state a value, and a letter whose derivation ends on a value that is no option.
# The sixth round's development replies (aki-wada/IgakuQA-evaluation, PROVENANCE "Split by source" step 10) the new
# rules do not read: "答え:" (answer) followed by an explanation that opens with the option's text but also names
# another option ("乳頭浮腫を伴う脳浮腫は、急性大動脈解離や…"), with the option's text shortened ("尿沈渣で赤血球円柱は" for
# "…円柱＋"), or that names the option only mid-sentence.
IQE = "igakuqa-evaluation/liquid/lfm2.5-1.2b/"
DEVELOPMENT_FAILURES = {"zero-shot-cot/text-davinci-002/aqua-224@aqua_zero_shot_cot.log": "no answer, read D",
                        "mathvista/llama_adapter_v2/829@output_llama_adapter_v2.json": "C, missed",
                        "mathvista/bard/634@output_bard.json": "B, missed",
                        "mathvista/llava/688@output_llava_llama_2_13b.json": "A, missed",
                        "mathvista/llavar/33@output_llavar.json": "D, missed",
                        "mathvista/llavar/688@output_llavar.json": "E, missed",
                        "mathvista/llavar/704@output_llavar.json": "C, missed",
                        "mathvista/llavar/887@output_llavar.json": "D, missed",
                        "mathvista/llavar/938@output_llavar.json": "B, missed",
                        "mathvista/minigpt4/285@output_minigpt4_llama2.json": "A, missed",
                        "mathvista/minigpt4/643@output_minigpt4_llama2.json": "B, missed",
                        "mathvista/mplugowl/670@output_mplugowl_7b_ft.json": "A, missed",
                        "mathvista/mplugowl/704@output_mplugowl_7b_ft.json": "A, missed",
                        IQE + "chain_of_thought/116A12@prompt_comparison_liquid_lfm2.5-1.2b_2022_A.json": "C, missed",
                        IQE + "chain_of_thought/116A30@prompt_comparison_liquid_lfm2.5-1.2b_2022_A.json": "C, missed",
                        IQE + "chain_of_thought/116A57@prompt_comparison_liquid_lfm2.5-1.2b_2022_A.json": "C, missed"}


@pytest.mark.parametrize("split", SPLITS)
def test_the_aims_hold(split):
    """Development: every failure is a recorded one and the aims hold. Locked: the failures are exactly those
    measured when it was scored (the aims of 0 invented, and of 97 % read on the third, fourth and fifth parts alone and on
    all parts together, are not met there; RESULTS.md says so)."""
    counts, failures = outcomes([c for c in CASES if c["split"] == split])
    detail = "\n".join(failures)
    found = {line.split(": ")[0]: line.split(": ")[1].split(" by ")[0].split(" (")[0] for line in failures}
    assert found == (LOCKED_FAILURES if split == "locked" else DEVELOPMENT_FAILURES), detail
    if split == "development":
        assert counts["read"] >= 0.97 * counts["clear"], detail


def test_the_corpus_covers_every_rule_and_language():
    rules = Counter()
    for case in CASES:
        parsed = parse_closed_answer(case["reply"], case["options"], markers(case))
        if parsed.label:
            rules[parsed.rule] += 1
    for rule in ("answer_field", "answer_tag", "final_phrase", "label_first", "copula", "last_line", "response",
                 "stated_text", "concluded_text"):
        assert rules[rule], rule
    languages = Counter(case["language"] for case in CASES)
    assert {"en", "zh", "de", "ko", "ja"} <= set(languages)
    assert {c["split"] for c in CASES} == set(SPLITS)
    assert sum(c["reasoning"] is not None for c in CASES) >= 10  # replies of a reasoning family
