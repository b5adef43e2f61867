"""The README's first screen gets a new user from nothing to a scored report: its quickstart block, run line by line
in a shell as written, with three local adjustments (the data folder is a temporary one, the server's port is a free
one, and the shell waits for the stand-in to listen before the next line, as a person typing would). `make test` is
the suite running this test, so it is the one line not run."""
from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

from mmbu.build.release.card import MMBU_CITATION

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text(encoding="utf-8")


def quickstart_lines() -> list[str]:
    block = README.split("<!-- quickstart -->", 1)[1].split("<!-- /quickstart -->", 1)[0]
    return [re.sub(r"\s+#.*$", "", line).strip() for line in block.splitlines() if line.strip()]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def as_script(lines: list[str], data: Path, stamp: Path, port: int) -> str:
    """The block as a bash script: the same commands, pointed at this test's data folder, port and environment."""
    bin_dir = Path(sys.executable).parent
    script = ["set -e"]
    for line in lines:
        if line == "make test":
            continue
        line = line.replace("8000", str(port))
        if line == "make demo":  # the project's venv is the one running this test; the stamp says it is installed
            line = f"make -s -C {REPO} demo MMBU_DATA={data} VENV={bin_dir.parent} STAMP={stamp}"
        elif line == ". .venv/bin/activate":
            line = f'export PATH="{bin_dir}:$PATH"'
        script.append(line)
        if line.endswith("&"):
            script.append(f"for i in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null && break; "
                          "sleep 0.2; done")
    return "\n".join(script) + "\n"


def test_readme_quickstart_runs_to_a_scored_report(tmp_path):
    lines = quickstart_lines()
    assert lines[:3] == ["make test", "make demo", ". .venv/bin/activate"]
    assert len(lines) <= 10 and lines[-1] == "kill %1"
    stamp = tmp_path / "installed"
    stamp.touch()
    work = tmp_path / "user"
    work.mkdir()
    script = as_script(lines, tmp_path / "user" / "data", stamp, free_port())
    done = subprocess.run(["bash", "-c", script], cwd=work, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "MMBU_DATA": str(work / "data")})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    report = (work / "report" / "report.md").read_text(encoding="utf-8")
    assert "## Provenance" in report and "mmbu-eval-prompt-" in report and "mmbu-judge-" in report
    for template in ("No Context", "Modality", "Full Context"):
        assert f"## Results — {template} template" in report
    row = next(line for line in report.splitlines() if line.startswith("| Qwen2.5-VL-7B | 0."))
    assert row.count("/") >= 5  # closed / open for four tasks and the overall column
    assert (work / "report" / "scores.csv").stat().st_size > 100


def test_readme_cites_mmbu_as_the_release_card_does():
    assert MMBU_CITATION in README
