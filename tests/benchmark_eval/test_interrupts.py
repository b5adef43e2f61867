"""Ctrl-C (SIGINT to the process group, as a terminal sends it) and SIGTERM (to the process, as `kill` or a batch
scheduler sends it) stop every `mmbu eval` command with the counts so far and the command that resumes, exit 130 /
143 — not click's "Aborted!" and 1, the code for "some items failed"."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from support.eval_release import write_release
from support.openai_server import OpenAIServer

SLUG = "Qwen__Qwen3-VL-8B-Instruct"
MODEL_ARGS = ["--model", "Qwen3-VL-8B", "--retry-backoff", "0.01"]
# A stand-in for a long scoring: touches `marker` once the command is at work, then waits to be interrupted.
SLOW_SCORING = """
import pathlib, time
import mmbu.benchmark_eval.scoring.api as api
def slow(*args, **kwargs):
    pathlib.Path({marker!r}).touch()
    time.sleep(120)
api.score_runs = slow
"""


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # a shell starts background jobs with SIGINT ignored


def interrupt(args: list[str], ready, how: int, tmp_path: Path, prelude: str = "") -> tuple[int, str]:
    """Run `mmbu ARGS` in its own session, wait until `ready()`, send `how`, return (exit code, stderr)."""
    log = tmp_path / f"stderr-{how}.log"
    with open(log, "w") as stderr:
        process = subprocess.Popen([sys.executable, "-c", f"{prelude}\nfrom mmbu.cli import main; main()", *args],
                                   stdout=subprocess.DEVNULL, stderr=stderr, start_new_session=True,
                                   preexec_fn=_default_sigint, env={**os.environ, "MMBU_PROGRESS_SECONDS": "0.1"})
        deadline = time.monotonic() + 60
        while not ready() and time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.05)
        assert process.poll() is None, log.read_text()[-2000:]
        if how == signal.SIGINT:
            os.killpg(process.pid, signal.SIGINT)  # Ctrl-C reaches the whole foreground group
        else:
            os.kill(process.pid, signal.SIGTERM)
        code = process.wait(timeout=60)
    return code, log.read_text()


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    return write_release(tmp_path_factory.mktemp("release"), count=6, tasks=("ungrounded_classification",))


def records(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.exists() else 0


@pytest.mark.parametrize("how, code, said", [(signal.SIGINT, 130, "interrupted (Ctrl-C)"),
                                             (signal.SIGTERM, 143, "terminated (SIGTERM)")])
def test_eval_run(release, tmp_path, how, code, said):
    predictions = tmp_path / "runs" / SLUG / "predictions.jsonl"
    with OpenAIServer(latency_s=0.3) as server:
        args = ["eval", "run", "--release", str(release), "--base-url", server.url, "--out", str(tmp_path / "runs"),
                "--concurrency", "2", *MODEL_ARGS]
        exit_code, stderr = interrupt(args, lambda: records(predictions) >= 2, how, tmp_path)
    assert exit_code == code and said in stderr and "Traceback" not in stderr, stderr[-3000:]
    assert "answers ok" in stderr and str(predictions) in stderr  # the counts so far, and where they are
    assert f"mmbu eval run --release {release} --base-url" in stderr  # the command that resumes
    assert "Aborted!" not in stderr and predictions.read_bytes().endswith(b"\n")


@pytest.mark.parametrize("how, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_eval_judge(release, tmp_path, how, code):
    with OpenAIServer() as server:
        run = subprocess.run([sys.executable, "-m", "mmbu", "eval", "run", "--release", str(release), "--base-url",
                              server.url, "--out", str(tmp_path / "runs"), *MODEL_ARGS], capture_output=True)
        assert run.returncode == 0, run.stderr.decode()[-2000:]
    log = tmp_path / f"stderr-{how}.log"
    with OpenAIServer(latency_s=1.0) as judge:
        args = ["eval", "judge", str(tmp_path / "runs" / SLUG), "--judge-base-url", judge.url, "--concurrency", "1"]
        exit_code, stderr = interrupt(args, lambda: log.exists() and "judging with" in log.read_text(), how, tmp_path)
    assert exit_code == code and "Traceback" not in stderr, stderr[-3000:]
    assert "pairs this run" in stderr and "judgements.jsonl" in stderr and "mmbu eval judge" in stderr


@pytest.mark.parametrize("command", ["score", "report"])
@pytest.mark.parametrize("how, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_eval_score_and_report(release, tmp_path, command, how, code):
    with OpenAIServer() as server:
        run = subprocess.run([sys.executable, "-m", "mmbu", "eval", "run", "--release", str(release), "--base-url",
                              server.url, "--out", str(tmp_path / "runs"), *MODEL_ARGS], capture_output=True)
        assert run.returncode == 0, run.stderr.decode()[-2000:]
    marker = tmp_path / "scoring"
    out = ["--out", str(tmp_path / ("scores.json" if command == "score" else "report"))]
    exit_code, stderr = interrupt(["eval", command, str(tmp_path / "runs" / SLUG), *out], marker.exists, how,
                                  tmp_path, prelude=SLOW_SCORING.format(marker=str(marker)))
    assert exit_code == code and "Traceback" not in stderr, stderr[-3000:]
    assert "scored 0 of 1 run(s)" in stderr and f"mmbu eval {command} {tmp_path / 'runs' / SLUG}" in stderr
