"""Pathological replies cost linear time (issue 32 point 5): half a megabyte of a repeated marker parses in under
a second, in the parser, the box reader, the open-answer pre-check and through the scorer.

Before, a reply of 0.5 MB repeating "Answer: " or "<think>" stalled the scorer for minutes: each marker was
matched against the rest of the reply. CPU time (not wall time) is measured, so other processes on the
machine do not make the bound flaky; the bound is far above the linear cost and far below the quadratic one.
"""
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from eval_run_factory import make_record, write_run  # noqa: E402
from support.eval_release import write_release  # noqa: E402

from mmbu.benchmark_eval.judge.precheck import precheck_equivalent
from mmbu.benchmark_eval.parser import extract_boxes, parse_closed_answer, strip_reasoning
from mmbu.benchmark_eval.release import load_samples
from mmbu.benchmark_eval.rundir import load_gold, open_run
from mmbu.benchmark_eval.scoring.outcomes import score_records

HALF_MB = 500_000
UNG, DET = "ungrounded_classification", "object_detection"
NORM1000 = {"scale": "norm1000", "order": "xyxy"}
MARKERS = ["Answer: ", "Answer:\n", "<think>", "</think>", "<answer>", "the answer is ", "答案：", "【答案】",
           "\\boxed{", "{", "[", '{"answer": ', "A, ", "it is ", "(A) ", "$", "```", "Option C is correct. "]
OPTIONS = ["alpha", "beta", "gamma", "delta"]


def repeated(marker: str) -> str:
    return marker * (HALF_MB // len(marker.encode("utf-8")))


def cpu_seconds(function, *args) -> float:
    start = time.process_time()
    function(*args)
    return time.process_time() - start


@pytest.mark.parametrize("marker", MARKERS)
def test_half_a_megabyte_of_a_repeated_marker_parses_in_under_a_second(marker):
    reply = repeated(marker)
    assert len(reply.encode("utf-8")) >= HALF_MB - 50
    for reader in (lambda: parse_closed_answer(reply, OPTIONS), lambda: extract_boxes(reply),
                   lambda: precheck_equivalent(reply, "alpha"), lambda: strip_reasoning(reply)):
        assert cpu_seconds(reader) < 1.0, marker


def test_an_answer_after_the_repetition_is_still_read():
    """The bounds keep the reply's end: a long repetition followed by the answer is read as before."""
    assert parse_closed_answer(repeated("<think>") + "</think>\nAnswer: B", OPTIONS).label == "B"
    assert parse_closed_answer(repeated("<think>"), OPTIONS).label is None  # never closed: no answer
    assert parse_closed_answer(repeated("Answer: ") + "C", OPTIONS).label == "C"
    assert parse_closed_answer("Answer: D\n" + repeated("a " ), OPTIONS).label == "D"
    assert extract_boxes(repeated("Answer:\n") + "[10, 20, 30, 40]").boxes == ((10.0, 20.0, 30.0, 40.0),)


def test_the_scorer_scores_pathological_replies_in_linear_time(tmp_path):
    """Closed, open and detection records whose outputs are half a megabyte of a repeated marker."""
    release = write_release(tmp_path / "release", tasks=(UNG, DET), count=4, size=(64, 48))
    ids = list(load_samples(release, UNG)["sample_id"])
    det_ids = list(load_samples(release, DET)["sample_id"])
    records = []
    for i, marker in enumerate(("Answer: ", "<think>", "the answer is ", "\\boxed{")):
        records += [make_record(ids[i], UNG, "closed", "no_context", repeated(marker), "m"),
                    make_record(ids[i], UNG, "open", "no_context", repeated(marker), "m"),
                    make_record(det_ids[i], DET, "open", "no_context", repeated(marker), "m", box_format=NORM1000,
                                image_size=(64, 48), sent_size=(64, 48), content_size=(64, 48))]
    run = open_run(write_run(tmp_path / "runs", "m", release, records))
    gold = load_gold(run.release_dir)
    elapsed = cpu_seconds(score_records, run, gold)
    assert elapsed < 0.5 * len(records)  # linear: well under a second per half-megabyte record
