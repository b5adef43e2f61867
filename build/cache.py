"""Skip a build step when its inputs have not changed (DVC's idea without DVC).

Each dataset keeps `work/<id>/state.json`: for every step, the hash of its inputs and the outputs it
wrote. A step reruns when the hash differs or an output is missing; the state is updated only after
the step succeeded, so a killed build reruns exactly the unfinished steps.
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from mmbu.core.files import write_json_atomic


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
        return all(map(os.path.exists, entry.get("outputs", [])))  # strings: a stat per PNG, no Path each

    def outputs(self, step: str) -> dict[str, Any]:
        return self._steps.get(step, {}).get("result", {})

    def record(self, step: str, inputs_hash: str, outputs: list[Path], result: dict[str, Any]) -> None:
        self._steps[step] = {"inputs": inputs_hash, "outputs": [str(p) for p in outputs], "result": result}
        write_json_atomic(self.path, self._steps)

    def forget_from(self, steps: list[str]) -> None:
        """Invalidate these steps (the later ones of a chain whose earlier step reran).

        Written only when one of them was recorded: a first build would otherwise rewrite (and fsync) the state
        three more times per dataset for nothing."""
        if any([self._steps.pop(step, None) is not None for step in steps]):
            write_json_atomic(self.path, self._steps)
