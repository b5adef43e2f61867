"""Scoring runs on a small release written in the test: counts, F1, deltas, baselines, breakdowns, pairs."""
import json
import re
import sys
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

sys.path.insert(0, str(Path(__file__).parent))

from eval_run_factory import make_record, write_run  # noqa: E402
from support.eval_release import write_release  # noqa: E402

from mmbu.benchmark_eval.judge.cache import Judgement, VerdictCache, verdict_key
from mmbu.benchmark_eval.judge.prompt import JUDGE_PROMPT_VERSION
from mmbu.benchmark_eval.judge.run import open_items, write_judge_file
from mmbu.benchmark_eval.release import load_samples
from mmbu.benchmark_eval.rundir import Coverage, RunInputError, open_run
from mmbu.benchmark_eval.scoring.api import ScoreConfig, run_score
from mmbu.benchmark_eval.scoring.cli import score
from mmbu.benchmark_eval.scoring.scores import ScoreOptions, score_runs

UNG, DET = "ungrounded_classification", "object_detection"
SCORE_KEYS = {"kind", "model", "task", "form", "template", "n", "f1", "ci_low", "ci_high", "random_baseline",
              "parse_failures", "judge_errors", "expected", "missing", "unparseable_share", "assisted_f1",
              "assisted_ci_low", "assisted_ci_high", "extracted"}
DELTA_KEYS = {"kind", "model", "task", "template", "delta", "ci_low", "ci_high"}
QWEN25 = {"scale": "pixel", "order": "xyxy",
          "resize": {"kind": "qwen25_smart_resize", "min_pixels": 3136, "max_pixels": 1003520, "factor": 28}}
NORM1000 = {"scale": "norm1000", "order": "xyxy"}


def letter(row, text=None):
    return "ABCDE"[list(row["options"]).index(text or row["answer"])]


def wrong_letter(row):
    return next(l for l, o in zip("ABCDE", row["options"]) if o != row["answer"])


@pytest.fixture
def release(tmp_path):
    return write_release(tmp_path / "release", tasks=(UNG, DET), count=4, size=(320, 240))


def closed_and_open_records(release, model):
    gold = load_samples(release, UNG).set_index("sample_id")
    ids = list(gold.index)
    closed = [
        make_record(ids[0], UNG, "closed", "no_context", letter(gold.loc[ids[0]]), model),
        make_record(ids[1], UNG, "closed", "no_context", f"Answer: {letter(gold.loc[ids[1]])}", model),
        make_record(ids[2], UNG, "closed", "no_context", wrong_letter(gold.loc[ids[2]]), model),
        make_record(ids[3], UNG, "closed", "no_context", "I cannot tell from this image.", model),
    ]
    # fixture labels cycle nucleus, mitochondrion, red blood cell, platelet
    opened = [
        make_record(ids[0], UNG, "open", "no_context", "Nucleus.", model),            # pre-check
        make_record(ids[1], UNG, "open", "no_context", "an organelle", model),        # judge: not equivalent
        make_record(ids[2], UNG, "open", "no_context", "erythrocyte", model),         # judge: equivalent
        make_record(ids[3], UNG, "open", "no_context", None, model, status="error"),  # run error: left out
    ]
    return closed + opened


def add_verdicts(run_dir, release, judge_model="judge-a"):
    gold = load_samples(release, UNG).set_index("sample_id")
    ids = list(gold.index)
    cache = VerdictCache(run_dir / "judgements.jsonl")
    entries = []
    for sample, answer, verdict in ((ids[1], "an organelle", "not_equivalent"), (ids[2], "erythrocyte", "equivalent")):
        g = gold.loc[sample, "answer"]
        entries.append(Judgement(key=verdict_key(answer, g, judge_model, JUDGE_PROMPT_VERSION), answer=answer, gold=g,
                                 judge_model=judge_model, prompt_version=JUDGE_PROMPT_VERSION, verdict=verdict,
                                 method="llm"))
    cache.append(entries)
    write_judge_file(run_dir, judge_model)


def test_closed_is_accuracy_and_open_waits_for_the_judge(tmp_path, release):
    run_dir = write_run(tmp_path / "runs", "model-x", release, closed_and_open_records(release, "model-x"))
    report = score_runs([run_dir], options=ScoreOptions(resamples=200))
    closed, opened = report.scores
    assert set(closed.as_record(with_coverage=True)) == SCORE_KEYS and closed.as_record()["kind"] == "score"
    # 2 right, 1 wrong, 1 unparseable: F1 = 2*2 / (2*2 + 2 + 2) = 0.5 = accuracy
    assert (closed.n, closed.f1, closed.parse_failures, closed.judge_errors) == (4, 0.5, 1, 0)
    assert closed.random_baseline == pytest.approx(0.2)  # five options each
    assert closed.ci_low <= 0.5 <= closed.ci_high
    # no judge yet: only the pre-checked answer is scored; two await a verdict; the run error is left out
    assert (opened.n, opened.f1, opened.judge_errors) == (1, 1.0, 2)
    assert opened.random_baseline == pytest.approx(0.25)  # four distinct labels in the dataset
    diagnostics = {d.form: d for d in report.diagnostics}
    assert diagnostics["open"].run_errors == 1 and diagnostics["open"].judge_pending == 2
    assert diagnostics["closed"].parse_failure_rate == 0.25

    add_verdicts(run_dir, release)
    report = score_runs([run_dir], options=ScoreOptions(resamples=200))
    closed, opened = report.scores
    # pre-check equivalent, judge equivalent, judge not equivalent: 2*2 / (2*2 + 1 + 1)
    assert (opened.n, opened.f1, opened.judge_errors) == (3, pytest.approx(2 / 3, abs=1e-6), 0)
    (delta,) = report.deltas
    assert set(delta.as_record()) == DELTA_KEYS
    # paired over the 3 samples scored in both forms: closed 2/3 right (ids 0, 1), open 2/3 right (ids 0, 2)
    assert delta.delta == pytest.approx(0.0) and delta.ci_low <= 0 <= delta.ci_high


def test_score_command_writes_the_contract_and_says_the_judge_has_not_run(tmp_path, release):
    run_dir = write_run(tmp_path / "runs", "model-x", release, closed_and_open_records(release, "model-x"))
    out = tmp_path / "out" / "scores.json"
    result = CliRunner().invoke(score, [str(run_dir), "--out", str(out), "--resamples", "100", "--by", "modality"])
    assert result.exit_code == 1, result.output
    assert "`mmbu eval judge` has not run" in result.output
    records = json.loads(out.read_text())
    assert {r["kind"] for r in records} == {"score", "delta"}
    assert all(set(r) == (SCORE_KEYS if r["kind"] == "score" else DELTA_KEYS) for r in records)
    breakdowns = json.loads((out.parent / "scores.breakdowns.json").read_text())
    assert {b["field"] for b in breakdowns} == {"modality"}
    assert {b["value"] for b in breakdowns} == {"light microscopy"}
    assert (out.parent / "scores.diagnostics.json").exists() and (out.parent / "scores.provenance.json").exists()
    assert not (out.parent / "scores.paired.json").exists()  # one model: no pair, no empty file
    audit = pd.read_parquet(out.parent / "scores.records.parquet")
    closed = audit[audit["form"] == "closed"].sort_values("sample_id")
    assert closed["parse_path"].tolist() == ["response:label", "answer_field:label", "response:label",
                                             "unparseable:no_answer"]
    assert set(audit.loc[audit["form"] == "open", "judge_state"]) == {"precheck", "pending", "n/a"}

    add_verdicts(run_dir, release)
    result = CliRunner().invoke(score, [str(run_dir), "--out", str(out), "--resamples", "100"])
    # every open answer now has a verdict; the one record without a model answer still makes it exit 1
    assert result.exit_code == 1, result.output
    assert "has not run" not in result.output and "1 records have no model answer" in result.output


def test_score_command_input_errors_exit_2(tmp_path, release):
    run_dir = write_run(tmp_path / "runs", "model-x", release, closed_and_open_records(release, "model-x"))
    out = tmp_path / "scores.json"
    cases = [
        ([str(tmp_path / "missing")], "no predictions.jsonl"),
        ([str(run_dir), "--release", str(tmp_path / "elsewhere")], "release directory does not exist"),
        ([str(run_dir), "--by", "colour"], "--by colour: no such field"),
        ([str(run_dir), "--cluster-by-image"], "no 'image_sha256' column"),
    ]
    for arguments, message in cases:
        result = CliRunner().invoke(score, [*arguments, "--out", str(out)])
        assert result.exit_code == 2, result.output
        assert message in result.output and "Traceback" not in result.output
    assert not out.exists()  # nothing half-written


def detection_records(release, model, box_format, answer_for):
    gold = load_samples(release, DET).set_index("sample_id")
    records = []
    for sample_id, row in gold.iterrows():
        box = [float(v) for v in row["boxes"][0]]
        records.append(make_record(sample_id, DET, "open", "no_context", answer_for(sample_id, box), model,
                                   image_size=(320, 240), sent_size=(320, 240), box_format=box_format))
        records.append(make_record(sample_id, DET, "closed", "no_context", letter(row), model,
                                   image_size=(320, 240), sent_size=(320, 240), box_format=box_format))
    return records


def test_open_detection_in_two_box_conventions(tmp_path, release):
    ids = sorted(load_samples(release, DET)["sample_id"])

    def norm1000(sample_id, box):
        if sample_id == ids[3]:
            return "I cannot find it."                                       # unparseable: FP 1, FN 1
        x1, y1, x2, y2 = box
        values = [round(x1 / 320 * 1000), round(y1 / 240 * 1000), round(x2 / 320 * 1000), round(y2 / 240 * 1000)]
        if sample_id == ids[2]:
            values = [0, 0, 50, 50]                                          # a miss: FP 1, FN 1
        return f"<ref>cell</ref><box>[{values}]</box>"

    def qwen25(sample_id, box):
        # smart_resize(240, 320) = 252 x 308: pixel answers live in that frame
        x1, y1, x2, y2 = box
        scaled = [round(x1 * 308 / 320), round(y1 * 252 / 240), round(x2 * 308 / 320), round(y2 * 252 / 240)]
        extra = ', {"bbox_2d": [300, 230, 308, 252]}' if sample_id == ids[0] else ""  # an extra box: FP 1
        return f'```json\n[{{"bbox_2d": {scaled}, "label": "cell"}}{extra}]\n```'

    runs = [write_run(tmp_path / "runs", "internvl-like", release, detection_records(release, "internvl-like", NORM1000, norm1000)),
            write_run(tmp_path / "runs", "qwen25-like", release, detection_records(release, "qwen25-like", QWEN25, qwen25))]
    report = score_runs(runs, options=ScoreOptions(resamples=100))
    scores = {(s.model, s.form): s for s in report.scores}
    # internvl-like: TP 2, FP 2, FN 2 -> 4 / 8
    assert scores[("internvl-like", "open")].f1 == pytest.approx(0.5)
    assert scores[("internvl-like", "open")].parse_failures == 1
    # qwen25-like: TP 4, FP 1 (the extra box), FN 0 -> 8 / 9
    assert scores[("qwen25-like", "open")].f1 == pytest.approx(8 / 9, abs=1e-6)
    # closed detection: the option letter of the gold box
    assert scores[("qwen25-like", "closed")].f1 == 1.0
    baseline = scores[("qwen25-like", "open")].random_baseline
    assert 0 < baseline < 0.2  # a uniformly random box rarely reaches IoU 0.5 with a small gold box
    # win/tie/loss on the shared detection records
    pairs = {(p.task, p.form): p for p in report.paired}
    opened = pairs[(DET, "open")]
    assert (opened.model_a, opened.model_b) == ("internvl-like", "qwen25-like")
    # per-record F1: internvl 1, 1, 0, 0 ; qwen 2/3, 1, 1, 1 -> internvl wins 1, ties 1, loses 2
    assert (opened.wins, opened.ties, opened.losses) == (1, 1, 2)
    outcomes = report.outcomes
    paths = set(outcomes.loc[outcomes["model"] == "internvl-like", "parse_path"])
    assert {"internvl_box", "unparseable:no_box"} <= paths


def test_detection_without_a_declared_convention_is_refused(tmp_path, release):
    run_dir = write_run(tmp_path / "runs", "mystery", release,
                        detection_records(release, "mystery", None, lambda s, b: str(b)))
    out = tmp_path / "scores.json"
    result = CliRunner().invoke(score, [str(run_dir), "--out", str(out)])
    assert result.exit_code == 2 and "has no box_format" in result.output


def test_columnar_reader_matches_the_record_reader(tmp_path, release):
    from mmbu.benchmark_eval.records import read_records, read_records_frame, records_frame

    records = closed_and_open_records(release, "model-x") + detection_records(
        release, "model-x", QWEN25, lambda s, b: f"[{b[0]}, {b[1]}, {b[2]}, {b[3]}]")
    records.append(make_record(records[0].sample_id, UNG, "closed", "no_context", "E", "model-x"))  # a re-run
    run_dir = write_run(tmp_path / "runs", "model-x", release, records)
    path = run_dir / "predictions.jsonl"
    warnings: list[str] = []
    fast = read_records_frame(path, warnings)
    slow = records_frame(read_records(path))
    assert warnings == [] and len(fast) == len(slow) == len(records) - 1
    first = fast[(fast["sample_id"] == records[0].sample_id) & (fast["form"] == "closed") & (fast["task"] == UNG)]
    assert first["output"].tolist() == ["E"]  # the newest record of a key wins
    for column in ("sample_id", "task", "form", "template", "status", "output"):
        assert fast[column].tolist() == slow[column].tolist(), column
    detection = fast["task"] == DET
    assert fast.loc[detection, "box_format"].tolist() == [QWEN25] * int(detection.sum())
    assert [tuple(v) for v in fast.loc[detection, "image_size"]] == [tuple(v) for v in slow.loc[detection, "image_size"]]
    assert fast.loc[~detection, "box_format"].isna().all()


def test_damaged_run_files(tmp_path, release):
    run_dir = write_run(tmp_path / "runs", "model-x", release, closed_and_open_records(release, "model-x"))
    path = run_dir / "predictions.jsonl"
    good = path.read_bytes()
    out = tmp_path / "scores.json"
    # a run killed mid-write: the half line is skipped with a warning, the rest is scored
    path.write_bytes(good + b'{"sample_id": "ungr-0001", "task": "ungr')
    result = CliRunner().invoke(score, [str(run_dir), "--out", str(out), "--resamples", "20"])
    assert result.exit_code == 1 and "line 9 is truncated" in result.output
    assert json.loads(out.read_text())[0]["n"] == 4
    # a damaged line in the middle, or a value outside the contract: exit 2 naming the line
    lines = good.splitlines(keepends=True)
    for bad in (b"not json\n", lines[2].replace(b'"form":"closed"', b'"form":"half-open"')):
        path.write_bytes(b"".join(lines[:2]) + bad + b"".join(lines[3:]))
        result = CliRunner().invoke(score, [str(run_dir), "--out", str(out)])
        assert result.exit_code == 2 and "line 3 is not a valid run record" in result.output, result.output


def test_a_configuration_with_nothing_scored_has_no_f1(tmp_path, release):
    gold = load_samples(release, UNG)
    records = [make_record(s, UNG, "open", "no_context", "an organelle", "model-x") for s in gold["sample_id"]]
    report = score_runs([write_run(tmp_path / "runs", "model-x", release, records)], options=ScoreOptions(resamples=20))
    (only,) = report.scores
    assert (only.n, only.f1, only.ci_low, only.judge_errors) == (0, None, None, 4)


def test_worker_processes_give_the_same_scores(tmp_path, release):
    runs = [write_run(tmp_path / "runs", model, release, closed_and_open_records(release, model))
            for model in ("model-x", "model-y")]
    add_verdicts(runs[0], release)
    alone = score_runs(runs, options=ScoreOptions(resamples=50), jobs=1)
    together = score_runs(runs, options=ScoreOptions(resamples=50), jobs=2)
    assert alone.contract_records() == together.contract_records()
    assert alone.outcomes.equals(together.outcomes)


def test_image_size_missing_from_records_is_read_from_the_release(tmp_path, release):
    gold = load_samples(release, DET).set_index("sample_id")
    records = []
    for sample_id, row in gold.iterrows():
        x1, y1, x2, y2 = (float(v) for v in row["boxes"][0])
        answer = f"[{x1 / 320:.4f}, {y1 / 240:.4f}, {x2 / 320:.4f}, {y2 / 240:.4f}]"  # 0-1 of a 320x240 image
        records.append(make_record(sample_id, DET, "open", "no_context", answer, "llava-like",
                                   box_format={"scale": "norm1", "order": "xyxy"}))
    report = score_runs([write_run(tmp_path / "runs", "llava-like", release, records)],
                        options=ScoreOptions(resamples=20))
    assert report.scores[0].f1 == 1.0


def test_a_release_whose_answer_is_not_an_option_is_reported(tmp_path, release):
    shard = next((release / "data" / UNG).glob("*.parquet"))
    frame = pd.read_parquet(shard)
    frame = frame.sort_values("sample_id", ignore_index=True)
    frame.loc[3, "answer"] = "a label no option has"  # the sample whose closed reply is unparseable
    frame.to_parquet(shard, index=False)
    run_dir = write_run(tmp_path / "runs", "model-x", release, closed_and_open_records(release, "model-x"))
    report = score_runs([run_dir], options=ScoreOptions(resamples=20))
    assert report.scores[0].n == 3
    assert any("not one of the options" in w and frame.loc[3, "sample_id"] in w for w in report.warnings)


def gold_left_out(release):
    """The build's `none_answer_rate`: the first row's closed answer is "None of the above", its `label` the class."""
    shard = next((release / "data" / UNG).glob("*.parquet"))
    frame = pd.read_parquet(shard).sort_values("sample_id", ignore_index=True)
    frame["label"] = frame["answer"]
    frame.at[0, "options"] = [o for o in frame.at[0, "options"] if o != frame.at[0, "label"]]
    frame.at[0, "answer"] = "None of the above"
    frame.at[0, "answer_aliases"] = ["nuclei"]  # the build's aliases: other names of the class, not the class
    frame.to_parquet(shard, index=False)
    return frame


def test_open_gold_is_the_label_when_the_closed_answer_is_none_of_the_above(tmp_path):
    release = write_release(tmp_path / "release", tasks=(UNG,), count=8)  # labels cycle: each class twice
    frame = gold_left_out(release)
    assert frame.at[0, "label"] == "nucleus" and len(frame.at[0, "options"]) == 4
    records = []
    for _, row in frame.iterrows():
        records.append(make_record(row["sample_id"], UNG, "closed", "no_context", letter(row), "model-x"))
        records.append(make_record(row["sample_id"], UNG, "open", "no_context", row["label"].capitalize(), "model-x"))
    run_dir = write_run(tmp_path / "runs", "model-x", release, records)
    report = score_runs([run_dir], options=ScoreOptions(resamples=20))
    closed, opened = report.scores
    assert (closed.n, closed.f1) == (8, 1.0)
    assert closed.random_baseline == pytest.approx((1 / 4 + 7 / 5) / 8, abs=1e-6)  # 4 options once, else 5
    # the open question has no options: its gold is the class, so "Nucleus" is right (pre-check), not pending
    assert (opened.n, opened.f1, opened.judge_errors) == (8, 1.0, 0)
    # the dataset's open label set is its four classes; "None of the above" is no label of the open form
    assert opened.random_baseline == 0.25
    # and the judge is shown the class as the gold answer
    items = {item.answer: item.gold for item in open_items(open_run(run_dir))}
    assert items["Nucleus"] == "nucleus"


def test_breakdown_by_dataset_id(tmp_path, release):
    shard = next((release / "data" / UNG).glob("*.parquet"))
    frame = pd.read_parquet(shard).sort_values("sample_id", ignore_index=True)
    frame["dataset_id"] = ["set_a", "set_a", "set_b", "set_b"]
    frame.to_parquet(shard, index=False)
    run_dir = write_run(tmp_path / "runs", "model-x", release, closed_and_open_records(release, "model-x"))
    report = score_runs([run_dir], options=ScoreOptions(resamples=20, by=("dataset_id",)))
    closed = {b.value: b for b in report.breakdowns if b.form == "closed"}
    # ids 0, 1 right (set_a); id 2 wrong, id 3 unparseable (set_b)
    assert {v: (b.n, b.f1) for v, b in closed.items()} == {"set_a": (2, 1.0), "set_b": (2, 0.0)}
    with pytest.raises(RunInputError, match=r"--by colour: no such field.*sub_modality"):
        score_runs([run_dir], options=ScoreOptions(resamples=20, by=("colour",)))


def test_withheld_scores_are_none_in_python_and_a_dash_in_the_table(tmp_path, release):
    ids = list(load_samples(release, UNG)["sample_id"])
    records = [make_record(s, UNG, "closed", "no_context", "A", "model-x") for s in ids]
    records += [make_record(s, UNG, "closed", "modality", "A", "model-x") for s in ids[:3]]  # one record missing
    records += [make_record(s, UNG, "closed", "full_context", None, "model-x", status="error") for s in ids]
    run_dir = write_run(tmp_path / "runs", "model-x", release, records)
    scores = {s.template: s for s in score_runs([run_dir], options=ScoreOptions(resamples=20)).scores}
    assert isinstance(scores["no_context"].f1, float)
    # the contract's null, as in scores.json: not NaN beside the other configurations' numbers
    assert (scores["modality"].n, scores["modality"].missing) == (3, 1)
    assert [getattr(scores["modality"], k) for k in ("f1", "ci_low", "ci_high")] == [None, None, None]
    assert [getattr(scores["full_context"], k) for k in ("n", "f1", "random_baseline")] == [0, None, None]
    result = CliRunner().invoke(score, [str(run_dir), "--out", str(tmp_path / "scores.json"), "--resamples", "20"])
    modality = next(line for line in result.output.splitlines() if "modality" in line and "│" in line)
    assert not re.search(r"\bnan\b", result.output) and modality.count("—") == 2  # F1 and CI


def test_records_of_an_older_prompt_version_are_not_mixed_into_a_score(tmp_path, release):
    gold = load_samples(release, UNG).set_index("sample_id")
    ids = list(gold.index)
    old = [make_record(s, UNG, "closed", t, wrong_letter(gold.loc[s]), "model-x").model_copy(update={"prompt_version": "v1"})
           for t in ("no_context", "modality") for s in ids]
    # a new prompt version asks everything again; this re-run was cut short after two no_context samples
    new = [make_record(s, UNG, "closed", "no_context", letter(gold.loc[s]), "model-x").model_copy(update={"prompt_version": "v2"})
           for s in ids[:2]]
    run_dir = write_run(tmp_path / "runs", "model-x", release, old + new)
    result = run_score(ScoreConfig(run_dirs=(run_dir,), out=tmp_path / "scores.json", resamples=20))
    scores = {s.template: s for s in result.report.scores}
    # 2 answers to the v2 prompt and 2 to the v1 prompt are no score of either: withheld, 2 of 4 missing
    assert [getattr(scores["no_context"], k) for k in ("n", "f1", "expected", "missing")] == [2, None, 4, 2]
    assert any("2 records of an older prompt version" in w for w in result.report.warnings)
    assert any("2 of 4 records are missing" in m for m in result.incomplete) and result.exit_code == 1
    assert result.report.incomplete == [Coverage("model-x", UNG, "closed", "no_context", expected=4, present=2, missing=2)]
    # a configuration asked with one prompt version throughout is scored as it was: all v1 answers wrong
    assert [getattr(scores["modality"], k) for k in ("n", "f1", "missing")] == [4, 0.0, 0]


def test_the_open_random_baseline_of_a_one_label_dataset_counts_its_distractors(tmp_path):
    """A dataset with one label (cell nucleus) whose closed options add curated distractors: a random open answer
    picks among the four labels its questions offer, not among its one gold answer (a sure hit, baseline 1)."""
    release = write_release(tmp_path / "release", tasks=(UNG,), count=6)
    shard = next((release / "data" / UNG).glob("*.parquet"))
    frame = pd.read_parquet(shard).sort_values("sample_id", ignore_index=True)
    distractors = ["cytoplasm", "cell membrane", "vacuole"]
    frame["answer"] = frame["label"] = "cell nucleus"
    frame["options"] = [["cell nucleus", *distractors[:2], "None of the above"] if k % 2 else
                        [distractors[2], "None of the above", "cell nucleus", distractors[0]] for k in range(len(frame))]
    frame.to_parquet(shard, index=False)
    records = []
    for _, row in frame.iterrows():
        records.append(make_record(row["sample_id"], UNG, "closed", "no_context", letter(row), "model-x"))
        records.append(make_record(row["sample_id"], UNG, "open", "no_context", "Cell nucleus", "model-x"))
    run_dir = write_run(tmp_path / "runs", "model-x", release, records)
    closed, opened = score_runs([run_dir], options=ScoreOptions(resamples=20)).scores
    assert closed.random_baseline == pytest.approx(0.25)  # four options each
    assert opened.random_baseline == pytest.approx(0.25)  # cell nucleus, cytoplasm, cell membrane, vacuole
    assert (opened.n, opened.f1) == (6, 1.0)
