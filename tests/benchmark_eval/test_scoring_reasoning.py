"""Scoring strips each model family's reasoning markers, and reads boxes in its declared frame."""
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from eval_run_factory import make_record, write_run  # noqa: E402
from support.eval_release import write_release  # noqa: E402

from mmbu.benchmark_eval.models import default_registry, to_model_convention
from mmbu.benchmark_eval.release import load_samples
from mmbu.benchmark_eval.rundir import run_markers
from mmbu.benchmark_eval.scoring.scores import ScoreOptions, score_runs
from mmbu.benchmark_eval.tasks import plan_frames

UNG, DET = "ungrounded_classification", "object_detection"
MEDGEMMA = default_registry().get("MedGemma-1.5-4B")
THINK, UNUSED = ("<think>", "</think>"), ("<unused94>", "<unused95>")


def test_markers_come_from_the_run_then_the_registry_then_every_family(tmp_path):
    run_json = tmp_path / "run.json"
    entry = MEDGEMMA.model_dump(mode="json")
    run_json.write_text(json.dumps({"entry": entry}))
    assert run_markers(run_json, "renamed-on-the-server").pairs == (UNUSED, THINK)
    entry["chat"]["thinking_prefilled"] = True
    run_json.write_text(json.dumps({"entry": entry}))
    assert run_markers(run_json, "x").prefilled
    run_json.write_text(json.dumps({"release": "r"}))  # an older run.json: the registry by model name
    assert run_markers(run_json, "google/medgemma-1.5-4b-it").pairs == (UNUSED, THINK)
    assert run_markers(run_json, "Qwen/Qwen3-VL-8B-Instruct").pairs == (THINK,)
    assert set(run_markers(tmp_path / "missing.json", "my-own-vlm").pairs) == {THINK, UNUSED}


@pytest.fixture
def release(tmp_path):
    return write_release(tmp_path / "release", tasks=(UNG, DET), count=2, size=(320, 240))


def test_a_medgemma_run_is_scored_after_its_thought_blocks(tmp_path, release):
    model = MEDGEMMA.name
    closed = load_samples(release, UNG).set_index("sample_id")
    first, second = closed.index[:2]
    right = "ABCDE"[list(closed.loc[first, "options"]).index(closed.loc[first, "answer"])]
    wrong = next(l for l, o in zip("ABCDE", closed.loc[second, "options"]) if o != closed.loc[second, "answer"])
    records = [
        # the thought names the wrong letter; the answer after it is right
        make_record(first, UNG, "closed", "no_context", f"<unused94>thought\nAnswer: {wrong}? No.<unused95>Answer: {right}", model),
        # a thought that never closes is no answer, whatever it names
        make_record(second, UNG, "closed", "no_context", f"<unused94>thought\nThe answer is {right}", model),
    ]
    detection = load_samples(release, DET).set_index("sample_id")
    frames = plan_frames((320, 240), MEDGEMMA)
    assert (frames.sent_size, frames.content_offset) == ((320, 320), (0, 40))  # centred square, as trained
    for sample_id, row in detection.iterrows():
        gold = tuple(row["boxes"][0])
        y0, x0, y1, x1 = to_model_convention(gold, MEDGEMMA.box_format, frames.image_size, frames.content_size,
                                             frames.sent_size, frames.content_offset)
        reply = (f"<unused94>thought\nDraft: [0, 0, 100, 100]<unused95>Reasoning: the object is bright.\n"
                 f"```json\n[{{\"box_2d\": [10, 10, 60, 60], \"label\": \"guess\"}}]\n```\nOn reflection:\n"
                 f"```json\n[{{\"box_2d\": [{y0:.0f}, {x0:.0f}, {y1:.0f}, {x1:.0f}], \"label\": \"object\"}}]\n```")
        records.append(make_record(sample_id, DET, "open", "no_context", reply, model, image_size=frames.image_size,
                                   sent_size=frames.sent_size, content_size=frames.content_size,
                                   content_offset=frames.content_offset,
                                   box_format=MEDGEMMA.box_format.model_dump(mode="json")))
    run_dir = write_run(tmp_path / "runs", model, release, records)
    report = score_runs([run_dir], options=ScoreOptions(resamples=50))
    scores = {(s.task, s.form): s for s in report.scores}
    closed_score, detection_score = scores[(UNG, "closed")], scores[(DET, "open")]
    assert (closed_score.n, closed_score.f1, closed_score.parse_failures) == (2, 0.5, 1)
    assert detection_score.f1 == 1.0  # y-first, offset by the padding, the final block only
