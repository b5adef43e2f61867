"""Run Python in a fresh process and measure what it cost: its answer (JSON on its last line of output), its
peak resident memory and whether it finished in time.

The peak is the process's own VmHWM (high-water mark since exec), so pytest's size is not counted; the child
runs under an address-space cap, so an attack that still works fails the test instead of the machine.
"""
from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

MIB = 1024
ADDRESS_SPACE_CAP = 6 * 1024**3  # bytes: well above any bounded run (Python and its libraries map ~1-2 GiB)

_EPILOGUE = """
import json as _json, re as _re
_peak = int(_re.search(r"VmHWM:\\s+(\\d+) kB", open("/proc/self/status").read()).group(1))
print(_json.dumps({"answer": ANSWER, "peak_kib": _peak}))
"""


@dataclass
class Measured:
    answer: Any
    peak_kib: int


def _cap() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_CAP, ADDRESS_SPACE_CAP))


def run_measured(code: str, *, env: dict[str, str] | None = None, timeout: float = 120) -> Measured:
    """Run `code` (which sets the JSON-able variable `ANSWER`) in a fresh interpreter; its answer and peak."""
    result = subprocess.run([sys.executable, "-c", code + _EPILOGUE], capture_output=True, text=True,
                            timeout=timeout, env={**os.environ, **(env or {})}, preexec_fn=_cap)
    assert result.returncode == 0, result.stderr[-3000:]
    line = json.loads(result.stdout.strip().splitlines()[-1])
    return Measured(line["answer"], line["peak_kib"])
