"""`mmbu convert` on a folder holding a FIFO named like an image and a file name that is not UTF-8:
one error line each, the other files convert, nothing blocks (issue 16, points 7 and 11)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image


def _folder(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    src.mkdir()
    for name in ("a.png", os.fsdecode(b"b\xff\xfe.png"), "c.png"):
        Image.fromarray(np.full((8, 12), 90, np.uint8)).save(src / name)
    os.mkfifo(src / "fifo.png")  # opening it for reading would block until a writer comes
    return src


@pytest.mark.parametrize("jobs", [1, 2])
def test_fifo_and_undecodable_name_cost_one_line_each(tmp_path, jobs):
    src, out = _folder(tmp_path), tmp_path / "out"
    result = subprocess.run([sys.executable, "-m", "mmbu", "convert", str(src), "--out", str(out), "--jobs", str(jobs)],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    records = {Path(r["source"]).name: r for r in map(json.loads, (out / "convert-report.jsonl").read_text("utf-8").splitlines())}
    assert records["a.png"]["status"] == records["c.png"]["status"] == "ok"
    assert records["fifo.png"]["error"].endswith("fifo.png is a FIFO (named pipe), not a regular file; only regular files are read")
    assert "b\\xff\\xfe.png has a file name that is not valid UTF-8" in records["b\\xff\\xfe.png"]["error"]
    assert sorted(p.name for p in out.glob("*.png")) == ["a.png", "c.png"]
