"""Every scoring output says what produced it: the release (version, inputs hash), the toolkit versions, the prompt
and judge-prompt versions, the model and the judge as their servers reported them, the dates and the command lines
without secrets; and an overall row, with no empty artefact beside it."""
from __future__ import annotations

import json
import re

import pandas as pd
import pytest
from support.eval_release import write_release
from support.openai_server import OpenAIServer

from mmbu.benchmark_eval.judge.api import JudgeConfig, run_judge
from mmbu.benchmark_eval.judge.prompt import JUDGE_PROMPT_VERSION
from mmbu.benchmark_eval.report.api import ReportConfig, run_report
from mmbu.benchmark_eval.runner.api import EvalConfig, run_eval
from mmbu.benchmark_eval.tasks.prompts import PROMPT_VERSION
from mmbu.core.version import toolkit_version

MODEL, SERVED = "Qwen2.5-VL-7B", "Qwen/Qwen2.5-VL-7B-Instruct"
INPUTS = "5e1f" * 16
SECRET = "sk-" + "provenanceTestKey0123456789"


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    folder = write_release(tmp_path_factory.mktemp("release"), count=3, tasks=("ungrounded_classification",
                                                                              "object_detection"))
    (folder / "build_info.json").write_text(json.dumps({"release_version": "0.1.0", "inputs_hash": INPUTS,
                                                        "toolkit_version": "0.2.0"}))
    return folder


def test_the_report_says_what_produced_it(release, tmp_path):
    runs = tmp_path / "runs"
    command = ("mmbu", "eval", "run", "--release", str(release), "--api-key", SECRET, "--base-url",
               "http://lab:8000/v1")
    with OpenAIServer(report_as={SERVED: "qwen2.5-vl-7b-awq"}) as model_server:
        run_eval(EvalConfig(release_dir=release, runs_dir=runs, model=MODEL, base_urls=(model_server.url,),
                            retry_backoff=0.01, command_line=command))
    run_dir = runs / "Qwen__Qwen2.5-VL-7B-Instruct"
    with OpenAIServer(report_as={"Qwen/Qwen3-32B": "Qwen/Qwen3-32B-FP8"}) as judge_server:
        run_judge(JudgeConfig(run_dir=run_dir, judge_base_url=judge_server.url))
    result = run_report(ReportConfig(run_dirs=(run_dir,), out_dir=tmp_path / "report", resamples=50,
                                     command_line=("mmbu", "eval", "report", str(run_dir), "--token", SECRET)))
    markdown = result.written["report.md"].read_text()
    head = markdown.split("## Results")[0]
    assert re.search(r"Scored \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ with mmbu " + re.escape(toolkit_version()), head)
    # the cells are Markdown-safe (core.outputs.markdown_cell): `<redacted>` is written &lt;redacted&gt;
    assert "mmbu eval report " in head and "--token &lt;redacted&gt;" in head
    provenance_row = next(line for line in head.splitlines() if line.startswith("| Qwen2.5-VL-7B"))
    for fact in ("| qwen2.5-vl-7b-awq |", f"0.1.0 (inputs {INPUTS[:12]})", f"| {PROMPT_VERSION} |",
                 "Qwen/Qwen3-32B (reported: Qwen/Qwen3-32B-FP8)", f"| {JUDGE_PROMPT_VERSION} |",
                 f"| {toolkit_version()} |", "--api-key &lt;redacted&gt;"):
        assert fact in provenance_row, (fact, provenance_row)
    assert SECRET not in markdown and SECRET not in result.written["provenance.json"].read_text()
    assert re.search(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ → \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", provenance_row)

    scores = pd.read_csv(result.written["scores.csv"])
    assert set(scores["release_inputs_hash"]) == {INPUTS} and set(scores["model_reported"]) == {"qwen2.5-vl-7b-awq"}
    assert set(scores["judge_reported"]) == {"Qwen/Qwen3-32B-FP8"} and set(scores["prompt_version"]) == {PROMPT_VERSION}
    judge = json.loads((run_dir / "judge.json").read_text())
    assert judge["judge_model"] == "Qwen/Qwen3-32B" and judge["judge_model_reported"] == ["Qwen/Qwen3-32B-FP8"]

    overall = pd.read_csv(result.written["overall.csv"])
    closed = overall[(overall["kind"] == "overall") & (overall["form"] == "closed")
                     & (overall["template"] == "no_context")].iloc[0]
    per_task = scores[(scores["form"] == "closed") & (scores["template"] == "no_context")]["f1"]
    assert closed["tasks"] == 2 and closed["f1"] == pytest.approx(per_task.mean(), abs=1e-6)
    assert "| Model | Ungrounded classification | Object detection | Overall |" in markdown
    # one model: no paired comparison, and no file for it; every file written holds something
    assert "paired.csv" not in result.written
    assert all(path.stat().st_size > 1 for path in result.written.values())
