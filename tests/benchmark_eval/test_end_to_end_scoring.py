"""mmbu eval run → judge → score → report on a release written in the test, three box conventions."""
import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from PIL import Image

sys.path.insert(0, str(Path(__file__).parent))

from support.eval_release import write_release  # noqa: E402
from support.judge_stub import fenced_pair  # noqa: E402
from support.openai_server import OpenAIServer  # noqa: E402

from mmbu.cli import cli

# registry model -> (served name, loopback family). Qwen2.5-VL answers pixels of the smart-resized
# image, InternVL 0-1000 x-first, Gemma (declared norm1000) is served here by a y-first 0-1000 family
# only to show that a *declared* convention is what counts: its detection score must collapse.
MODELS = {
    "Qwen/Qwen2.5-VL-7B-Instruct": ("qwen25", "qwen25"),
    "OpenGVLab/InternVL3_5-8B": ("internvl", "internvl"),
    "google/gemma-3-4b-it": ("gemma", "gemini"),
}


def judge_reply(call) -> str:
    gold, answer = fenced_pair(call.prompt)
    same = gold == "nucleus" and "nuclei" in answer
    return f"Comparing the two.\nVERDICT: {'EQUIVALENT' if same else 'NOT_EQUIVALENT'}"


def invoke(*arguments):
    return CliRunner().invoke(cli, [str(a) for a in arguments], catch_exceptions=False)


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("e2e")
    release = write_release(tmp / "release", count=4, size=(320, 240))
    runs = tmp / "runs"
    families = {served: family for served, family in MODELS.values()}
    with OpenAIServer(families=families) as server:
        for model, (served, _) in MODELS.items():
            result = invoke("eval", "run", "--release", release, "--model", model, "--base-url", server.url,
                            "--served-model-name", served, "--out", runs, "--concurrency", "8")
            assert result.exit_code == 0, result.output
    run_dirs = sorted(p for p in runs.iterdir() if p.is_dir())
    assert len(run_dirs) == 3
    return tmp, release, run_dirs


def test_score_before_the_judge_says_so(evaluated):
    tmp, _, run_dirs = evaluated
    result = invoke("eval", "score", *run_dirs, "--out", tmp / "before" / "scores.json", "--resamples", "50")
    assert result.exit_code == 1
    assert "`mmbu eval judge` has not run" in result.output


def test_run_judge_score_report(evaluated):
    tmp, release, run_dirs = evaluated
    with OpenAIServer(responder=judge_reply) as judge_server:
        for run_dir in run_dirs:
            result = invoke("eval", "judge", run_dir, "--judge-model", "judge-a", "--judge-base-url", judge_server.url)
            assert result.exit_code == 0, result.output
        calls = len(judge_server.calls)
        assert calls > 0
        # judged again: everything is cached, no request
        result = invoke("eval", "judge", run_dirs[0], "--judge-model", "judge-a", "--judge-base-url", judge_server.url)
        assert result.exit_code == 0 and len(judge_server.calls) == calls

    out = tmp / "scores.json"
    result = invoke("eval", "score", *run_dirs, "--out", out, "--by", "sub_modality", "--resamples", "200")
    assert result.exit_code == 0, result.output
    records = json.loads(out.read_text())
    scores = {(r["model"], r["task"], r["form"], r["template"]): r for r in records if r["kind"] == "score"}
    assert len(scores) == 3 * 4 * 2 * 3
    for template in ("no_context", "modality", "full_context"):
        # the loopback models find the object in the image they were sent and answer in their own convention;
        # undoing the declared convention puts every box back on the gold box (IoU >= 0.5)
        assert scores[("Qwen/Qwen2.5-VL-7B-Instruct", "object_detection", "open", template)]["f1"] == 1.0
        assert scores[("OpenGVLab/InternVL3_5-8B", "object_detection", "open", template)]["f1"] == 1.0
        # a y-first answerer declared x-first: transposed boxes miss (the declaration is never second-guessed)
        assert scores[("google/gemma-3-4b-it", "object_detection", "open", template)]["f1"] < 0.5
        assert scores[("Qwen/Qwen2.5-VL-7B-Instruct", "object_detection", "closed", template)]["f1"] == 1.0
    for record in scores.values():
        assert record["n"] == 4 and record["judge_errors"] == 0 and record["parse_failures"] == 0
        assert record["ci_low"] <= record["f1"] <= record["ci_high"]
        if record["form"] == "closed":
            assert record["random_baseline"] == pytest.approx(0.2)
    deltas = [r for r in records if r["kind"] == "delta"]
    assert len(deltas) == 3 * 4 * 3

    report_dir = tmp / "report"
    result = invoke("eval", "report", *run_dirs, "--out", report_dir, "--resamples", "200")
    assert result.exit_code == 0, result.output
    markdown = (report_dir / "report.md").read_text()
    assert "| Model | Ungrounded classification | Box-grounded classification |" in markdown
    assert "| Qwen2.5-VL-7B |" in markdown and "| InternVL3.5-8B |" in markdown  # the paper's names
    assert re.search(r"\| Random \| 0\.200 / 0\.250 \|", markdown)
    assert json.loads((report_dir / "scores.json").read_text()) == records  # same seed, same numbers
    for name in ("f1_by_config.png", "delta_by_model.png", "heatmap_sub_modality_closed.png",
                 "heatmap_sub_modality_open.png"):
        with Image.open(report_dir / name) as image:
            pixels = np.asarray(image.convert("L"))
        assert min(pixels.shape) > 200 and pixels.std() > 10, name  # a drawn figure, not a blank canvas
        assert f"({name})" in markdown
    for name in ("scores.csv", "deltas.csv", "breakdowns.csv", "paired.csv", "diagnostics.csv"):
        assert (report_dir / name).stat().st_size > 0
