"""Run `mmbu ...` in a fresh process and measure it: exit code, output and the peak memory of its process tree.

A probe process starts the command, so `RUSAGE_CHILDREN` covers that command's processes only (pytest's own
size is not counted, as it would be in a child of pytest itself).
"""
from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

_PROBE = (
    "import json, resource, subprocess, sys\n"
    "done = subprocess.run([sys.executable, '-m', 'mmbu', *sys.argv[2:]], capture_output=True, text=True,\n"
    "                      cwd=sys.argv[1] or None)\n"
    "print(json.dumps({'code': done.returncode, 'stdout': done.stdout, 'stderr': done.stderr,\n"
    "                  'peak_kib': resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}))\n"
)

GIB_KIB = 1024 * 1024


@dataclass
class BoundedRun:
    returncode: int
    stdout: str
    stderr: str
    peak_kib: int

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


def run_mmbu(*args: str | Path, cwd: Path | None = None, timeout: float = 120, env: dict | None = None) -> BoundedRun:
    """`mmbu *args` with its exit code, output and peak resident memory (KiB)."""
    probe = subprocess.run([sys.executable, "-c", _PROBE, str(cwd or ""), *map(str, args)], capture_output=True,
                           text=True, timeout=timeout, env=env)
    assert probe.returncode == 0, probe.stderr
    result = json.loads(probe.stdout)
    return BoundedRun(result["code"], result["stdout"], result["stderr"], result["peak_kib"])
