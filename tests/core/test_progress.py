"""Progress when the output is not a terminal: plain, self-contained lines every few seconds, and tables that cut
no identifier."""
from __future__ import annotations

import io
import os
import re
import subprocess
import sys

from rich.table import Table

from mmbu.core.progress import PlainProgress, output_console, progress_seconds
from support.eval_release import write_release
from support.openai_server import OpenAIServer

LINE = re.compile(r"^eval run Qwen3-VL-8B: (\d+)/24 \(\d+\.\d%\) · ok (\d+) · error (\d+) · skipped \d+ · retries \d+ · "
                  r"[\d.]+ req/s · [\d,]+ tok/s · ETA (?:\d\d:\d\d:\d\d|–)$")


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_plain_lines_are_throttled_and_say_rates_and_time_left():
    stream, clock = io.StringIO(), FakeClock()
    progress = PlainProgress("judging", unit="pairs/s", stream=stream, interval=5, clock=clock)
    progress.update(0, 100, counts={"ok": 0}, tokens=0)
    for done in range(1, 11):
        clock.now += 1
        progress.update(done, 100, counts={"ok": done}, tokens=done * 50)
    progress.close()
    lines = stream.getvalue().splitlines()
    # the first update, one after five seconds, one after ten, and the last only if it changed since
    assert lines == ["judging: 0/100 (0.0%) · ok 0 · 0.0 pairs/s · 0 tok/s · ETA –",
                     "judging: 5/100 (5.0%) · ok 5 · 1.0 pairs/s · 50 tok/s · ETA 00:01:35",
                     "judging: 10/100 (10.0%) · ok 10 · 1.0 pairs/s · 50 tok/s · ETA 00:01:30"]


def test_skipped_items_do_not_inflate_the_rate():
    stream, clock = io.StringIO(), FakeClock()
    progress = PlainProgress("eval run m", unit="req/s", stream=stream, interval=0, clock=clock)
    progress.update(900, 1000, answered=0)  # a resume: 900 already there
    clock.now += 10
    progress.update(920, 1000, answered=20)
    assert stream.getvalue().splitlines()[-1] == "eval run m: 920/1,000 (92.0%) · 2.0 req/s · ETA 00:00:40"


def test_the_interval_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv("MMBU_PROGRESS_SECONDS", "0.5")
    assert progress_seconds() == 0.5
    monkeypatch.setenv("MMBU_PROGRESS_SECONDS", "soon")
    assert progress_seconds() == 5.0


def test_a_table_written_to_a_file_cuts_no_identifier():
    table = Table(title="scores")
    table.add_column("model")
    table.add_column("task")
    name = "my-organisation/a-very-long-model-name-that-is-longer-than-eighty-columns-by-itself-v2-instruct"
    table.add_row(name, "mask_grounded_classification")
    console = output_console(stderr=False)  # pytest's captured stdout is not a terminal
    with console.capture() as captured:
        console.print(table)
    assert name in captured.get() and "mask_grounded_classification" in captured.get()


def test_eval_run_prints_progress_lines_into_a_file(tmp_path):
    release = write_release(tmp_path / "release", count=4, tasks=("ungrounded_classification",))
    log = tmp_path / "nohup.out"
    with OpenAIServer(latency_s=0.05) as server, open(log, "w") as out:
        finished = subprocess.run(
            [sys.executable, "-m", "mmbu", "eval", "run", "--release", str(release), "--model", "Qwen3-VL-8B",
             "--base-url", server.url, "--out", str(tmp_path / "runs"), "--concurrency", "2"],
            stdout=out, stderr=subprocess.STDOUT, timeout=120,
            env={**os.environ, "MMBU_PROGRESS_SECONDS": "0.1"})
    text = log.read_text()
    assert finished.returncode == 0, text
    lines = [line for line in text.splitlines() if line.startswith("eval run ")]
    assert len(lines) >= 3 and all(LINE.match(line) for line in lines), text  # while it runs, not only at exit
    assert LINE.match(lines[-1]).group(1, 2, 3) == ("24", "24", "0")
    assert "\x1b[" not in text  # no terminal control codes in a log
    assert "ungrounded_classification" in text  # the completeness table, its identifiers whole
