"""Ctrl-C and SIGTERM stop `mmbu build` and `mmbu fetch` with what was done and the command that resumes, exit
130 / 143; a SIGTERM to the build alone (as `kill PID` sends it) also ends its worker processes at once."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import yaml

from support.loopback import LoopbackServer, Reply, Request

REPO = Path(__file__).resolve().parents[2]


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # a shell starts background jobs with SIGINT ignored


def interrupt(args: list[str], ready, how: int, log: Path, cwd: Path = REPO) -> tuple[int, str, list[psutil.Process]]:
    """Run `mmbu ARGS` in its own session, wait until `ready()`, send `how` (SIGINT to the group, SIGTERM to the
    process); returns the exit code, stderr and the children it had."""
    with open(log, "w") as stderr:
        process = subprocess.Popen([sys.executable, "-m", "mmbu", *args], stdout=subprocess.DEVNULL, stderr=stderr,
                                   start_new_session=True, preexec_fn=_default_sigint, cwd=cwd,
                                   env={**os.environ, "MMBU_PROGRESS_SECONDS": "0.1"})
        deadline = time.monotonic() + 90
        while not ready() and time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.05)
        assert process.poll() is None, log.read_text()[-2000:]
        children = psutil.Process(process.pid).children(recursive=True)
        if how == signal.SIGINT:
            os.killpg(process.pid, signal.SIGINT)
        else:
            os.kill(process.pid, signal.SIGTERM)
        code = process.wait(timeout=60)
    return code, log.read_text(), children


@pytest.mark.parametrize("how, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_build(tmp_path, how, code):
    data = tmp_path / "data"
    args = ["build", "--manifests", "manifests/demo", "--mirror", "manifests/mirror", "--data", str(data),
            "--jobs", "2"]
    exit_code, stderr, children = interrupt(args, lambda: (data / "work").is_dir(), how, tmp_path / "stderr.log")
    assert exit_code == code and "Traceback" not in stderr, stderr[-3000:]
    assert "dataset(s); each finished step is kept" in stderr
    assert f"mmbu build --manifests manifests/demo --mirror manifests/mirror --data {data} --jobs 2" in stderr
    _, alive = psutil.wait_procs(children, timeout=10)
    assert not alive  # no worker goes on converting for a build that has stopped
    assert not (data / "release").exists()


@pytest.mark.parametrize("how, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_fetch(tmp_path, how, code):
    payload = bytes(range(256)) * 4096  # 1 MiB, sent slowly

    def slow_file(request: Request) -> Reply:
        if request.headers.get("range") == "bytes=0-0":  # the plan's size probe answers at once
            return Reply(206, payload[:1], {"Content-Range": f"bytes 0-0/{len(payload)}"})
        return Reply(200, payload, {"Content-Type": "application/zip"}, delay=60)

    manifests = tmp_path / "repo" / "manifests" / "datasets"
    manifests.mkdir(parents=True)
    with LoopbackServer() as server:
        server.add("GET", "/slow.zip", slow_file)
        document = {"id": "slow", "title": "Slow", "license": "CC-BY-4.0", "citation": "Doe J. 2024.",
                    "source": {"kind": "url", "files": [{"url": f"{server.url}/slow.zip"}]},
                    "tasks": ["ungrounded_classification"], "layout": {"kind": "folder_per_class", "root": "."},
                    "metadata": {"image_source": "web", "dataset_name": "slow", "domain": "Hematology",
                                 "modality": "light microscopy", "sub_modality": "brightfield microscopy",
                                 "specimen": "human", "topic": "cell morphology", "original_task": "classification",
                                 "url": "https://example.org"},
                    "labels": {"a": "monocyte", "b": "lymphocyte"}, "questions": {"options_name": "cell type"},
                    "curation": {"round": 3, "reviewers": ["r1", "r2"]}}
        (manifests / "slow.yaml").write_text(yaml.safe_dump(document))
        data = tmp_path / "data"
        requests_for_file = lambda: sum(r.path == "/slow.zip" and "range" not in r.headers  # noqa: E731
                                        for r in server.requests)
        exit_code, stderr, _ = interrupt(["fetch", "--manifests", str(manifests), "--data", str(data)],
                                         lambda: requests_for_file() >= 1, how, tmp_path / "stderr.log",
                                         cwd=tmp_path / "repo")
    assert exit_code == code and "Traceback" not in stderr, stderr[-3000:]
    assert "0 of 1 dataset(s) fetched and verified" in stderr
    assert f"mmbu fetch --manifests {manifests} --data {data}" in stderr
    assert not (data / "raw" / "slow").exists()  # nothing half-fetched where a build would trust it
