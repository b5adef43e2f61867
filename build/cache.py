"""Skip a build step when its inputs have not changed (DVC's idea without DVC).

Each dataset keeps `work/<id>/state.json`: for every step, the hash of its inputs and the outputs it
wrote. A step reruns when the hash differs or an output is missing; the state is updated only after
the step succeeded, so a killed build reruns exactly the unfinished steps.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any


def hash_json(value: Any) -> str:
    """A stable sha256 of JSON-serialisable data (keys sorted, paths as strings)."""
    text = json.dumps(value, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def hash_file(path: Path, chunk: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def file_fingerprint(paths: Iterable[Path]) -> list[tuple[str, int, int]]:
    """Cheap identity of many files (path, size, mtime in ns): enough to notice a changed input."""
    rows = []
    for path in sorted(Path(p) for p in paths):
        stat = path.stat()
        rows.append((str(path), stat.st_size, stat.st_mtime_ns))
    return rows


def write_json_atomic(path: Path, value: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(value, handle, indent=2, sort_keys=True, default=str)
            handle.write("\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class StepState:
    """The per-dataset record of which steps ran with which inputs."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self._steps: dict[str, dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            self._steps = {}  # missing or torn state: every step reruns, which is always safe

    def is_fresh(self, step: str, inputs_hash: str) -> bool:
        entry = self._steps.get(step)
        if not entry or entry.get("inputs") != inputs_hash:
            return False
        return all(Path(p).exists() for p in entry.get("outputs", []))

    def outputs(self, step: str) -> dict[str, Any]:
        return self._steps.get(step, {}).get("result", {})

    def record(self, step: str, inputs_hash: str, outputs: list[Path], result: dict[str, Any]) -> None:
        self._steps[step] = {"inputs": inputs_hash, "outputs": [str(p) for p in outputs], "result": result}
        write_json_atomic(self.path, self._steps)

    def forget_from(self, steps: list[str]) -> None:
        """Invalidate these steps (the later ones of a chain whose earlier step reran)."""
        for step in steps:
            self._steps.pop(step, None)
        write_json_atomic(self.path, self._steps)
