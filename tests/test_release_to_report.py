"""The whole product in one go: the demo release built by the pipeline (what `make demo` builds) is
evaluated with `mmbu eval run → judge → score → report` against loopback servers, for two models
with different box conventions (Qwen2.5-VL: pixels of the smart-resized image; InternVL: 0-1000)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from support.openai_server import OpenAIServer

from mmbu.build.pipeline import BuildConfig, run_build
from mmbu.cli import cli

REPO = Path(__file__).resolve().parents[1]
MODELS = {"Qwen/Qwen2.5-VL-7B-Instruct": ("qwen25", "qwen25"), "OpenGVLab/InternVL3_5-8B": ("internvl", "internvl")}
TASKS = ("ungrounded_classification", "box_grounded_classification", "mask_grounded_classification",
         "object_detection")


def invoke(*arguments):
    return CliRunner().invoke(cli, [str(a) for a in arguments], catch_exceptions=False)


def judge_reply(call) -> str:
    return "The two answers name different things.\nVERDICT: NOT_EQUIVALENT"


@pytest.fixture(scope="module")
def built_release(tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("product")
    shutil.copy(REPO / "manifests" / "manifests.lock", work / "manifests.lock")
    report = run_build(BuildConfig(manifests_dir=REPO / "manifests" / "demo", data_dir=work / "data",
                                   mirror=REPO / "manifests" / "mirror", lock_path=work / "manifests.lock",
                                   repo_root=REPO))
    assert report.exit_code == 0, report.failed
    return work / "data" / "release"


def test_built_release_runs_through_judge_score_and_report(built_release, tmp_path):
    runs = tmp_path / "runs"
    with OpenAIServer(families={served: family for served, family in MODELS.values()}) as server:
        for model, (served, _) in MODELS.items():
            result = invoke("eval", "run", "--release", built_release, "--model", model, "--base-url", server.url,
                            "--served-model-name", served, "--limit", "3", "--out", runs, "--concurrency", "4")
            assert result.exit_code == 0, result.output
    run_dirs = sorted(p for p in runs.iterdir() if p.is_dir())
    assert len(run_dirs) == 2
    for run_dir in run_dirs:
        completeness = json.loads((run_dir / "completeness.json").read_text())
        assert completeness, run_dir

    with OpenAIServer(responder=judge_reply) as judge:
        for run_dir in run_dirs:
            result = invoke("eval", "judge", run_dir, "--judge-model", "Qwen/Qwen3-32B", "--judge-base-url", judge.url)
            assert result.exit_code == 0, result.output

    scores_path = tmp_path / "scores.json"
    result = invoke("eval", "score", *run_dirs, "--out", scores_path, "--resamples", "100")
    assert result.exit_code == 0, result.output
    records = json.loads(scores_path.read_text())
    scores = [r for r in records if r.get("kind", "score") == "score" and "form" in r]
    assert {r["task"] for r in scores} == set(TASKS)
    assert {r["model"] for r in scores} == set(MODELS)
    for record in scores:
        assert {"model", "task", "form", "template", "n", "f1", "ci_low", "ci_high", "random_baseline",
                "parse_failures", "judge_errors"} <= set(record)
        assert record["judge_errors"] == 0
        if record["f1"] is not None:
            assert record["ci_low"] <= record["f1"] <= record["ci_high"]
    deltas = [r for r in records if "delta" in r]
    assert deltas and all({"model", "task", "template", "delta", "ci_low", "ci_high"} <= set(d) for d in deltas)

    report_dir = tmp_path / "report"
    result = invoke("eval", "report", *run_dirs, "--out", report_dir, "--resamples", "100")
    assert result.exit_code == 0, result.output
    markdown = (report_dir / "report.md").read_text()
    assert "| Random |" in markdown and "Qwen2.5-VL-7B" in markdown and "InternVL3.5-8B" in markdown
