"""Judge verdicts, cached in ``judgements.jsonl`` beside the run (append-only, resumable).

A verdict is keyed by (model answer, gold answer, judge model, judge prompt version): the same
answer to the same gold is judged once, whatever sample or model produced it. A judge *error*
(no readable verdict after the retries, or no answer from the judge server) is recorded too,
so it can be counted, but it is not a cached verdict: the next ``judge`` run tries again.
"""
from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Generic, Literal, TypeVar

from pydantic import BaseModel, ValidationError

from mmbu.benchmark_eval.records import repair_truncated_tail

Verdict = Literal["equivalent", "not_equivalent", "error"]
Entry = TypeVar("Entry", bound=BaseModel)


class Judgement(BaseModel):
    """One line of ``judgements.jsonl``."""

    key: str
    answer: str
    gold: str
    judge_model: str
    prompt_version: str
    prompt_sha256: str | None = None
    verdict: Verdict
    method: Literal["precheck", "llm"]
    attempts: int = 0
    judge_output: str | None = None  # the judge's last reply (for audits), trimmed
    error: str | None = None
    created_at: float = 0.0


def verdict_key(answer: str, gold: str, judge_model: str, prompt_version: str) -> str:
    payload = json.dumps([answer, gold, judge_model, prompt_version], ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


class AppendOnlyCache(Generic[Entry]):
    """A JSONL file of keyed entries, read once; :meth:`get` returns a usable entry (never an error);
    :meth:`append` writes a group of entries with one fsync. A later error never replaces a usable entry."""

    model: type[Entry]

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._entries: dict[str, Entry] = {}
        self.damaged_lines = 0
        if self.path.exists():
            for line in self.path.read_text(encoding="utf-8").splitlines():
                if not line.strip():
                    continue
                try:
                    entry = self.model.model_validate_json(line)
                except ValidationError:
                    self.damaged_lines += 1
                    continue
                previous = self._entries.get(entry.key)
                if previous is None or not self.is_error(entry) or self.is_error(previous):
                    self._entries[entry.key] = entry

    @staticmethod
    def is_error(entry: Entry) -> bool:
        raise NotImplementedError

    def get(self, key: str) -> Entry | None:
        entry = self._entries.get(key)
        return entry if entry is not None and not self.is_error(entry) else None

    def latest(self, key: str) -> Entry | None:
        """The newest entry for `key`, errors included."""
        return self._entries.get(key)

    def entries(self) -> list[Entry]:
        return list(self._entries.values())

    def append(self, entries: Iterable[Entry]) -> None:
        items = list(entries)
        if not items:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        repair_truncated_tail(self.path)
        payload = "".join(e.model_dump_json() + "\n" for e in items).encode("utf-8")
        with open(self.path, "ab") as handle:
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        for item in items:
            if not self.is_error(item) or self.get(item.key) is None:
                self._entries[item.key] = item


class VerdictCache(AppendOnlyCache[Judgement]):
    """Judge verdicts: :meth:`get` returns a verdict (never an error)."""

    model = Judgement

    @staticmethod
    def is_error(entry: Judgement) -> bool:
        return entry.verdict == "error"


def now() -> float:
    return time.time()
