"""Run the benchmarks (`make bench`): every `benchmarks/*.py`, each in its own process, then a summary.

    .venv/bin/python -m benchmarks.run                 # all, with their quick options
    .venv/bin/python -m benchmarks.run build_scale     # one (or several) by name
    .venv/bin/python -m benchmarks.run --full --write-results

A benchmark is any module in this folder other than this one; a new file is picked up without
changes here. Quick runs use the options in `QUICK_OPTIONS` (smaller inputs, one run), or the
script's own `--quick` when it has one and no entry exists. A failing benchmark (a missing peer
tool, a crash) is reported and the others still run; the exit code is 1 when any failed.
"""
from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent
NOT_BENCHMARKS = {"__init__", "run", "latency_server"}  # latency_server: a server the runner benchmark starts

# Quick options per benchmark: small inputs and one run, for a check that each one still works.
QUICK_OPTIONS: dict[str, list[str]] = {
    "build_scale": ["--quick"],
    "build_tail": ["--baseline-ref", "HEAD", "--samples", "4000", "--datasets", "10", "--rounds", "2"],
    "convert_dicom": ["--runs", "1"],
    "convert_formats": ["--runs", "1"],
    "convert_wsi": ["--runs", "1"],
    "eval_runner": ["--levels", "16,64", "--rounds", "5"],
    "eval_scoring": ["--predictions", "100000", "--models", "2", "--resamples", "200"],
    "release_write": ["--images", "100", "--runs", "1"],
}


@dataclass
class Outcome:
    name: str
    command: list[str]
    returncode: int | None
    seconds: float
    last_line: str

    @property
    def ok(self) -> bool:
        return self.returncode == 0


def discover(folder: Path = HERE) -> list[str]:
    """Benchmark names: the modules of this folder except this runner and the package file."""
    return sorted(p.stem for p in folder.glob("*.py") if p.stem not in NOT_BENCHMARKS)


def accepts(name: str, option: str) -> bool:
    """Whether the benchmark's command line has `option` (asked through its --help)."""
    result = subprocess.run([sys.executable, "-m", f"benchmarks.{name}", "--help"], cwd=ROOT, capture_output=True,
                            text=True, timeout=120)
    return result.returncode == 0 and option in result.stdout


def command_for(name: str, *, full: bool, write_results: bool) -> list[str]:
    options: list[str] = []
    if not full:
        options = list(QUICK_OPTIONS[name]) if name in QUICK_OPTIONS else (
            ["--quick"] if accepts(name, "--quick") else [])
    if write_results and accepts(name, "--write-results"):
        options.append("--write-results")
    return [sys.executable, "-m", f"benchmarks.{name}", *options]


def run_one(name: str, command: list[str], console: Console, timeout: float | None) -> Outcome:
    """Run one benchmark, echoing its output live and keeping the last line for the summary."""
    console.rule(f"[bold]{name}[/]: {' '.join(command[1:])}")
    tail: deque[str] = deque(maxlen=1)
    started = time.perf_counter()
    # its own process group, so a time-out also stops the tools it started (peers, build workers)
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               bufsize=1, start_new_session=True)
    echo = threading.Thread(target=_echo, args=(process.stdout, tail), daemon=True)
    echo.start()
    returncode: int | None
    try:
        returncode = process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        returncode = None
    echo.join()
    if returncode is None:
        tail.append(f"stopped after the {timeout:.0f} s time limit")
    return Outcome(name, command, returncode, time.perf_counter() - started, tail[0] if tail else "")


def _echo(stream: IO[str], tail: deque[str]) -> None:
    for line in stream:
        sys.stdout.write(line)
        sys.stdout.flush()
        if line.strip():
            tail.append(line.strip())


def summary_table(outcomes: list[Outcome]) -> Table:
    table = Table(title="benchmarks")
    for column in ("benchmark", "status", "seconds", "last line of output"):
        table.add_column(column)
    for outcome in outcomes:
        status = "ok" if outcome.ok else ("[red]timed out" if outcome.returncode is None
                                           else f"[red]failed ({outcome.returncode})")
        table.add_row(outcome.name, status, f"{outcome.seconds:.0f}", outcome.last_line[:100])
    return table


def main(argv: list[str] | None = None) -> int:
    available = discover()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", metavar="NAME",
                        help=f"benchmarks to run (default: all: {', '.join(available)})")
    parser.add_argument("--full", action="store_true", help="each benchmark's own defaults instead of quick options")
    parser.add_argument("--write-results", action="store_true",
                        help="pass --write-results to the benchmarks that accept it (updates RESULTS.md)")
    parser.add_argument("--timeout", type=float, default=None, help="seconds allowed per benchmark")
    parser.add_argument("--list", action="store_true", help="print the benchmark names and exit")
    args = parser.parse_args(argv)
    if args.list:
        print("\n".join(available))
        return 0
    unknown = sorted(set(args.names) - set(available))
    if unknown:
        parser.error(f"no benchmark named {', '.join(unknown)} (available: {', '.join(available)})")
    console = Console()
    outcomes = [run_one(name, command_for(name, full=args.full, write_results=args.write_results), console,
                        args.timeout)
                for name in (args.names or available)]
    console.print(summary_table(outcomes))
    return 0 if all(o.ok for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
