"""Judge a run's open answers: pre-check, then the LLM judge over an OpenAI-compatible server.

Only open classification answers are judged (open detection is scored by IoU). Each distinct
(answer, gold) pair is judged once per judge model and prompt version; verdicts are appended to
``judgements.jsonl`` in small groups as they arrive, so a killed judge resumes where it stopped. A reply whose
last line is not a verdict is asked again (``verdict_attempts`` times in all); after that, or
when the server gives no answer at all, the pair is recorded as a judge *error* — never as
"not equivalent".
"""
from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pandas as pd

from mmbu.benchmark_eval.backends.base import BackendError
from mmbu.benchmark_eval.judge.cache import AppendOnlyCache, Judgement, VerdictCache, now, verdict_key
from mmbu.benchmark_eval.judge.precheck import read_open_answer
from mmbu.benchmark_eval.judge.prompt import JUDGE_PROMPT_VERSION, judge_messages, parse_verdict, prompt_sha256
from mmbu.benchmark_eval.parser import DEFAULT_REASONING, ReasoningMarkers
from mmbu.benchmark_eval.rundir import OPEN_ANSWER, RunDir, load_gold
from mmbu.core.outputs import write_json
from mmbu.core.release import Form, Task
from mmbu.core.runs import RunFile
from mmbu.core.secrets import redact_argv
from mmbu.core.version import toolkit_version

DEFAULT_VERDICT_ATTEMPTS = 3
SAVE_EVERY = 32
ChatFunction = Callable[[list[dict]], Awaitable[str]]
Item = TypeVar("Item")


@dataclass(frozen=True)
class JudgeItem:
    answer: str  # the reply as the judge is shown it
    gold: str
    aliases: tuple[str, ...]
    prechecked: bool  # the answer is the gold answer or an alias: no judge asked

    @classmethod
    def read(cls, output: str | None, gold: str, aliases: tuple[str, ...] = (),
             reasoning: ReasoningMarkers = DEFAULT_REASONING) -> JudgeItem:
        answer = read_open_answer(output, gold, aliases, reasoning)
        return cls(answer.text, gold, aliases, answer.prechecked)


@dataclass
class JudgeSummary:
    judge_model: str
    open_records: int = 0  # open answers looked at
    precheck: int = 0      # answers equal to the gold answer or an alias
    cached: int = 0        # answers whose (answer, gold) pair already had a verdict
    judged: int = 0        # distinct pairs judged now
    errors: int = 0        # distinct pairs left without a verdict
    error_messages: list[str] = field(default_factory=list)
    reported_models: list[str] = field(default_factory=list)  # the judge as its server names itself


def open_items(run: RunDir, gold: dict[str, pd.DataFrame] | None = None) -> list[JudgeItem]:
    """The open classification answers of a run that have a model answer, joined to their gold."""
    gold = gold if gold is not None else load_gold(run.release_dir)
    records = run.records[(run.records["form"] == Form.OPEN) & (run.records["task"] != Task.DETECTION)
                          & (run.records["status"] == "ok")]
    items = []
    for task, group in records.groupby("task", sort=False):
        if task not in gold:
            continue
        table = gold[task]
        for sample_id, output in zip(group["sample_id"], group["output"]):
            if sample_id not in table.index:
                continue
            row = table.loc[sample_id]
            aliases = row.get("answer_aliases")
            items.append(JudgeItem.read(output, str(row[OPEN_ANSWER]), tuple(aliases) if aliases is not None else (),
                                        run.reasoning))
    return items


async def ask_for_verdict(chat: ChatFunction, answer: str, gold: str, attempts: int) -> tuple[bool | None, int, str | None, str | None]:
    """(verdict or None, attempts used, the judge's last reply, error message)."""
    reply: str | None = None
    for attempt in range(1, attempts + 1):
        try:
            reply = await chat(judge_messages(answer, gold))
        except BackendError as exc:
            return None, attempt, reply, f"judge server gave no answer ({exc.reason}): {exc}"
        verdict = parse_verdict(reply)
        if verdict is not None:
            return verdict, attempt, reply, None
    return None, attempts, reply, f"no VERDICT line in the judge's reply after {attempts} attempts"


async def judge_items(
    items: list[JudgeItem],
    chat: ChatFunction,
    cache: VerdictCache,
    judge_model: str,
    *,
    prompt_version: str = JUDGE_PROMPT_VERSION,
    verdict_attempts: int = DEFAULT_VERDICT_ATTEMPTS,
    progress: Callable[[int], None] | None = None,
    on_start: Callable[[int], None] | None = None,
    before_asking: Callable[[], Awaitable[None]] | None = None,
) -> JudgeSummary:
    """Pre-check every item, then ask the judge about each distinct uncached (answer, gold) pair (`before_asking`
    is awaited first when there is any: the endpoint's preflight, which a fully cached run does not need)."""
    summary = JudgeSummary(judge_model, open_records=len(items))
    sha = prompt_sha256()
    pending: dict[str, JudgeItem] = {}
    prechecked: dict[str, Judgement] = {}
    for item in items:
        key = verdict_key(item.answer, item.gold, judge_model, prompt_version)
        if item.prechecked:
            summary.precheck += 1
            if cache.get(key) is None and key not in prechecked:
                prechecked[key] = Judgement(key=key, answer=item.answer, gold=item.gold, judge_model=judge_model,
                                            prompt_version=prompt_version, prompt_sha256=sha, verdict="equivalent",
                                            method="precheck", created_at=now())
            continue
        if cache.get(key) is not None:
            summary.cached += 1
        else:
            pending.setdefault(key, item)
    cache.append(prechecked.values())
    if pending and before_asking is not None:
        await before_asking()
    if on_start:
        on_start(len(pending))

    async def one(key: str, item: JudgeItem) -> tuple[Judgement, str | None]:
        verdict, used, reply, error = await ask_for_verdict(chat, item.answer, item.gold, verdict_attempts)
        entry = Judgement(
            key=key, answer=item.answer, gold=item.gold, judge_model=judge_model, prompt_version=prompt_version,
            prompt_sha256=sha, method="llm", attempts=used, judge_output=(reply or "")[-2000:] or None, error=error,
            verdict="error" if verdict is None else ("equivalent" if verdict else "not_equivalent"), created_at=now())
        return entry, None if verdict is not None else f"{item.answer[:60]!r} vs {item.gold!r}: {error}"

    summary.judged, summary.errors, summary.error_messages = await ask_each(pending, one, cache, progress)
    return summary


async def ask_each(pending: dict[str, Item], ask: Callable[[str, Item], Awaitable[tuple[Any, str | None]]],
                   cache: AppendOnlyCache, progress: Callable[[int], None] | None = None) -> tuple[int, int, list[str]]:
    """Ask about every pending (key, item) at once; `ask` returns the cache entry and an error message or None.

    Entries are appended in groups of :data:`SAVE_EVERY` (one fsync each; a kill loses at most a group) and the
    rest when done or interrupted. Returns (answered, errors, error messages).
    """
    unsaved: list[Any] = []
    counts = {"done": 0, "errors": 0}
    messages: list[str] = []

    async def one(key: str, item: Item) -> None:
        entry, error = await ask(key, item)
        unsaved.append(entry)
        if len(unsaved) >= SAVE_EVERY:
            cache.append(unsaved)
            unsaved.clear()
        if error is None:
            counts["done"] += 1
        else:
            counts["errors"] += 1
            messages.append(error)
        if progress:
            progress(1)

    try:
        await asyncio.gather(*(one(key, item) for key, item in pending.items()))
    finally:
        cache.append(unsaved)
    return counts["done"], counts["errors"], messages


def write_judge_file(run_dir: Path, judge_model: str, prompt_version: str = JUDGE_PROMPT_VERSION,
                     second_judge_model: str | None = None, *, reported: list[str] | None = None,
                     second_reported: list[str] | None = None, command_line: list[str] | None = None) -> Path:
    """``judge.json``: which judge's verdicts ``score`` uses for this run, the judge as its server reports it (the
    `model` field of its answers, over every judge run of the same judge: a run with every verdict cached asks
    nothing), when and by which command (never a URL with a key, never a key)."""
    previous = read_judge_file(run_dir) or {}

    def over_runs(names: list[str] | None, model: str | None, key: str, model_key: str) -> list[str]:
        earlier = previous.get(key) or [] if previous.get(model_key) == model else []
        return sorted(set(names or ()) | set(earlier))

    return write_json(run_dir / RunFile.JUDGE, {
        "judge_model": judge_model,
        "judge_model_reported": over_runs(reported, judge_model, "judge_model_reported", "judge_model"),
        "prompt_version": prompt_version, "prompt_sha256": prompt_sha256(),
        "second_judge_model": second_judge_model,
        "second_judge_model_reported": over_runs(second_reported, second_judge_model, "second_judge_model_reported",
                                                 "second_judge_model"),
        "judgements": RunFile.JUDGEMENTS, "toolkit_version": toolkit_version(),
        "judged_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "command_line": redact_argv(command_line) if command_line else None,
    })


def read_judge_file(run_dir: Path) -> dict | None:
    path = run_dir / RunFile.JUDGE
    try:
        return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None
    except ValueError:
        return None
