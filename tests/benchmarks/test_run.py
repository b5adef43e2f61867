"""benchmarks.run: discovery, quick options, one failure does not stop the rest, time limit, exit codes."""
from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

from rich.console import Console

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("benchmarks_run", ROOT / "benchmarks" / "run.py")
runner = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = runner  # dataclasses look their module up
spec.loader.exec_module(runner)


def script(folder: Path, name: str, body: str) -> list[str]:
    path = folder / f"{name}.py"
    path.write_text(body, encoding="utf-8")
    return [sys.executable, str(path)]


def test_every_module_but_the_runner_is_a_benchmark(tmp_path):
    for name in ("__init__", "run", "alpha", "beta"):
        (tmp_path / f"{name}.py").write_text("", encoding="utf-8")
    assert runner.discover(tmp_path) == ["alpha", "beta"]
    assert {"build_scale", "convert_dicom", "eval_runner"} <= set(runner.discover())


def test_known_benchmarks_get_their_quick_options():
    assert runner.command_for("build_scale", full=False, write_results=False)[-1] == "--quick"
    assert runner.command_for("convert_dicom", full=False, write_results=False)[-2:] == ["--runs", "1"]
    assert runner.command_for("convert_dicom", full=True, write_results=False)[-1] == "benchmarks.convert_dicom"


def test_a_failure_is_summarised_and_a_hung_benchmark_is_stopped(tmp_path):
    console = Console(file=open(tmp_path / "log.txt", "w"), width=200)
    ok = runner.run_one("ok", script(tmp_path, "ok", "print('3.2 files/s')"), console, timeout=60)
    bad = runner.run_one("bad", script(tmp_path, "bad", "raise SystemExit('dcmj2pnm not found')"), console, 60)
    hung = runner.run_one("hung", script(tmp_path, "hung", "import time\nprint('start', flush=True)\ntime.sleep(60)"),
                          console, timeout=1)
    assert (ok.ok, ok.last_line) == (True, "3.2 files/s")
    assert (bad.ok, bad.returncode, bad.last_line) == (False, 1, "dcmj2pnm not found")
    assert hung.returncode is None and "time limit" in hung.last_line and hung.seconds < 30
    console.print(runner.summary_table([ok, bad, hung]))
    summary = (tmp_path / "log.txt").read_text(encoding="utf-8")
    assert "failed (1)" in summary and "timed out" in summary


def test_an_unknown_name_is_a_usage_error():
    result = subprocess.run([sys.executable, "-m", "benchmarks.run", "no_such_benchmark"], cwd=ROOT,
                            capture_output=True, text=True)
    assert result.returncode == 2
    assert "no_such_benchmark" in result.stderr and "build_scale" in result.stderr
