"""The `mini` profile end to end on the demo: `mmbu build --profile mini` (what `make demo PROFILE=mini` runs) writes
`release-mini/`, and `mmbu eval run` asks a model every question of it (no --limit) through the loopback stand-in
server, `mmbu eval judge` has a stand-in judge read the open answers and `mmbu eval score` scores every task."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from click.testing import CliRunner
from support.openai_server import OpenAIServer

from mmbu.cli import cli

REPO = Path(__file__).resolve().parents[1]
MODEL, SERVED = "Qwen/Qwen2.5-VL-7B-Instruct", "qwen25"
TASKS = {"ungrounded_classification", "box_grounded_classification", "mask_grounded_classification",
         "object_detection"}


def invoke(*arguments):
    return CliRunner().invoke(cli, [str(a) for a in arguments], catch_exceptions=False)


def test_mini_builds_the_demo_and_evaluates_every_task(tmp_path, monkeypatch):
    monkeypatch.chdir(REPO)
    shutil.copy(REPO / "manifests" / "manifests.lock", tmp_path / "manifests.lock")
    data = tmp_path / "data"
    result = invoke("build", "--manifests", REPO / "manifests" / "demo", "--mirror", REPO / "manifests" / "mirror",
                    "--data", data, "--lock", tmp_path / "manifests.lock", "--jobs", "2", "--profile", "mini")
    assert result.exit_code == 0, result.output
    release = data / "release-mini"
    info = json.loads((release / "build_info.json").read_text(encoding="utf-8"))
    assert info["composition"]["profile"] == "mini" and not (data / "release").exists()
    rows = info["rows"]
    assert set(rows) == TASKS
    # the nuclei field's 125 objects give 5 rows per grounded task (the mini caps), the liver overlay one more
    assert rows["box_grounded_classification"] == rows["mask_grounded_classification"] == 6

    runs = tmp_path / "runs"
    with OpenAIServer(families={SERVED: "qwen25"}) as server:
        result = invoke("eval", "run", "--release", release, "--model", MODEL, "--base-url", server.url,
                        "--served-model-name", SERVED, "--out", runs, "--concurrency", "8")
    assert result.exit_code == 0, result.output
    run_dir = next(p for p in runs.iterdir() if p.is_dir())
    records = [json.loads(line) for line in (run_dir / "predictions.jsonl").read_text(encoding="utf-8").splitlines()]
    # every row of every task, closed and open, in the three templates
    assert len(records) == sum(rows.values()) * 2 * 3 and all(r["status"] == "ok" for r in records)

    with OpenAIServer(responder=lambda call: "The two answers name different things.\nVERDICT: NOT_EQUIVALENT") as judge:
        result = invoke("eval", "judge", run_dir, "--judge-model", "Qwen/Qwen3-32B", "--judge-base-url", judge.url)
    assert result.exit_code == 0, result.output
    scores = tmp_path / "scores.json"
    result = invoke("eval", "score", run_dir, "--out", scores, "--resamples", "50")
    assert result.exit_code == 0, result.output
    scored = [r for r in json.loads(scores.read_text()) if r.get("kind", "score") == "score" and "form" in r]
    assert {(r["task"], r["form"]) for r in scored} == {(task, form) for task in TASKS for form in ("closed", "open")}
    assert all(r["f1"] is not None and r["judge_errors"] == 0 for r in scored)
