"""`run_judge(JudgeConfig)`: judge a run's open answers from Python; `mmbu eval judge` is a thin wrapper over it.

    from mmbu.benchmark_eval.judge.api import JudgeConfig, run_judge
    report = run_judge(JudgeConfig(run_dir=Path("runs/qwen2.5-vl-7b"), judge_base_url="http://judge:8000/v1"))
    report.errors, report.agreement

Verdicts are cached in RUN_DIR/judgements.jsonl by (answer, gold, judge model, prompt version), so a second call
asks only what is new or failed; `judge.json` records which judge's verdicts `score` uses. With a second judge,
both judge the same pairs and their agreement (Cohen's kappa, flip rate) goes to judge_agreement.json. With
`extract_closed`, the closed replies the strict parser cannot read go to the extractor (judge/extract.py), cached
in extractions.jsonl, named in extractor.json; `score` then reports an assisted F1 beside the strict one.
Before asking, each judge endpoint is asked what it serves and one tiny question (`PreflightError` when it cannot
serve); `max_consecutive_failures` requests in a row failing in transport or with a 5xx stop the judge
(`CircuitOpen`; the verdicts had so far are cached). `judge.json` records the judge as configured and as its server
reports it. Unusable input raises `RunInputError` (files) or `ValueError` (options).
"""
from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from mmbu.benchmark_eval.backends.bounded_body import DEFAULT_MIN_RESPONSE_RATE
from mmbu.benchmark_eval.backends.openai_compat import (DEFAULT_API_KEY_ENV, DEFAULT_MAX_CONSECUTIVE_FAILURES,
                                                        OpenAICompatClient)
from mmbu.benchmark_eval.backends.preflight import preflight
from mmbu.benchmark_eval.judge.agreement import judge_agreement
from mmbu.benchmark_eval.judge.cache import VerdictCache
from mmbu.benchmark_eval.judge.extract import ExtractionSummary, extract_items, unparseable_items, write_extractor_file
from mmbu.benchmark_eval.judge.extraction_cache import ExtractionCache
from mmbu.benchmark_eval.judge.prompt import DEFAULT_JUDGE_MODEL, JUDGE_PROMPT_VERSION
from mmbu.benchmark_eval.judge.run import (DEFAULT_VERDICT_ATTEMPTS, ChatFunction, JudgeItem, JudgeSummary, judge_items,
                                           open_items, write_judge_file)
from mmbu.benchmark_eval.rundir import load_gold, open_run
from mmbu.core.cli import ExitCode
from mmbu.core.outputs import write_json
from mmbu.core.runs import RunFile

Result = TypeVar("Result")


@dataclass(frozen=True)
class JudgeConfig:
    """One `mmbu eval judge`: every option of the command, with its defaults."""

    run_dir: Path  # RUNS_DIR/<model>
    judge_base_url: str  # OpenAI-compatible base URL of the judge, including /v1
    judge_model: str = DEFAULT_JUDGE_MODEL  # as the server knows it (the paper: Qwen3-32B)
    api_key_env: str = DEFAULT_API_KEY_ENV  # unset: no key sent
    release_dir: Path | None = None  # default: the one named in the run's run.json
    second_judge_model: str | None = None  # a second judge for an agreement report
    second_judge_base_url: str | None = None  # default: judge_base_url
    concurrency: int = 16
    max_tokens: int = 2048  # reasoning judges think before the verdict line
    verdict_attempts: int = DEFAULT_VERDICT_ATTEMPTS  # asked again when a reply has no VERDICT line
    timeout_s: float = 120.0  # one request's deadline, the whole exchange
    retry_backoff: float = 1.0  # base (s) of the jittered exponential backoff between attempts (Retry-After wins)
    min_response_rate: float = DEFAULT_MIN_RESPONSE_RATE  # bytes/s; a slower answer is cut (a dripping server)
    extract_closed: bool = False  # also ask which option each unparseable closed reply gives (assisted score)
    extractor_model: str | None = None  # default: judge_model
    max_consecutive_failures: int = DEFAULT_MAX_CONSECUTIVE_FAILURES  # judge requests failing in a row that stop it
    preflight: bool = True  # ask each judge endpoint what it serves and one tiny question first
    command_line: tuple[str, ...] | None = None  # recorded in judge.json (secrets removed); default: this process's


@dataclass
class JudgeReport:
    summaries: list[JudgeSummary] = field(default_factory=list)  # the judge's, then the second judge's
    agreement: dict | None = None
    agreement_file: Path | None = None
    extraction: ExtractionSummary | None = None  # with extract_closed

    @property
    def errors(self) -> int:
        """Answers left without a verdict (judge errors) over both judges, and replies left without an extraction."""
        return sum(summary.errors for summary in self.summaries) + (self.extraction.errors if self.extraction else 0)

    @property
    def exit_code(self) -> ExitCode:
        return ExitCode.ITEMS_FAILED if self.errors else ExitCode.OK


JudgeProgress = Callable[[str], tuple[Callable[[int], None], Callable[[int], None]]]
"""judge model -> (on_start(total pairs to ask), on_advance(pairs done)) for one judge's pass."""


def run_judge(config: JudgeConfig, progress: JudgeProgress | None = None) -> JudgeReport:
    """Judge the open answers of `config.run_dir` (and with a second judge, report their agreement)."""
    if config.second_judge_model == config.judge_model:
        raise ValueError("--second-judge-model must differ from --judge-model")
    run = open_run(config.run_dir, config.release_dir)
    items = open_items(run, load_gold(run.release_dir))
    cache = VerdictCache(run.path / RunFile.JUDGEMENTS)
    report = JudgeReport()
    report.summaries.append(_judge_pass(items, cache, config.judge_model, config.judge_base_url, config, progress))
    write_judge_file(run.path, config.judge_model, JUDGE_PROMPT_VERSION, config.second_judge_model,
                     reported=report.summaries[0].reported_models, command_line=_command_line(config))
    if config.second_judge_model:
        report.summaries.append(_judge_pass(items, cache, config.second_judge_model,
                                            config.second_judge_base_url or config.judge_base_url, config, progress))
        write_judge_file(run.path, config.judge_model, JUDGE_PROMPT_VERSION, config.second_judge_model,
                         reported=report.summaries[0].reported_models, command_line=_command_line(config),
                         second_reported=report.summaries[1].reported_models)
        report.agreement = judge_agreement(cache, config.judge_model, config.second_judge_model, JUDGE_PROMPT_VERSION)
        report.agreement_file = write_json(run.path / RunFile.JUDGE_AGREEMENT, report.agreement)
    if config.extract_closed:
        report.extraction = _extraction_pass(run, config, progress)
    return report


def _extraction_pass(run, config: JudgeConfig, progress: JudgeProgress | None) -> ExtractionSummary:
    """Ask the extractor about the run's unparseable closed replies; write extractor.json for the assisted score."""
    model = config.extractor_model or config.judge_model
    items = unparseable_items(run, load_gold(run.release_dir))
    cache = ExtractionCache(run.path / RunFile.EXTRACTIONS)
    on_start, on_advance = progress(f"{model} (extraction)") if progress else (None, None)
    if on_start:
        on_start(len(items))

    async def work(chat: ChatFunction, check_endpoint: Callable[[], Awaitable[None]]) -> ExtractionSummary:
        if items and config.preflight:
            await check_endpoint()
        return await extract_items(items, chat, cache, model, attempts=config.verdict_attempts, progress=on_advance)

    summary, _ = _with_chat(config, model, config.judge_base_url, work)
    write_extractor_file(run.path, model)
    return summary


def _judge_pass(items: list[JudgeItem], cache: VerdictCache, model: str, base_url: str, config: JudgeConfig,
                progress: JudgeProgress | None) -> JudgeSummary:
    on_start, on_advance = progress(model) if progress else (None, None)

    async def work(chat: ChatFunction, check_endpoint: Callable[[], Awaitable[None]]) -> JudgeSummary:
        return await judge_items(items, chat, cache, model, verdict_attempts=config.verdict_attempts,
                                 on_start=on_start, progress=on_advance,
                                 before_asking=check_endpoint if config.preflight else None)

    summary, reported = _with_chat(config, model, base_url, work)
    summary.reported_models = reported
    return summary


def _with_chat(config: JudgeConfig, model: str, base_url: str,
               work: Callable[[ChatFunction, Callable[[], Awaitable[None]]], Awaitable[Result]]
               ) -> tuple[Result, list[str]]:
    """Run `work(chat, check_endpoint)` over one OpenAI-compatible client (temperature 0, the config's limits and
    circuit breaker); `check_endpoint` is the endpoint's preflight, which `work` awaits once it has something to ask.
    Returns the result and the model names the server reported (preflight and answers)."""
    async def run() -> tuple[Result, list[str]]:
        async with OpenAICompatClient(base_url, model, api_key_env=config.api_key_env,
                                      concurrency=config.concurrency, timeout_s=config.timeout_s,
                                      backoff_s=config.retry_backoff, min_response_rate=config.min_response_rate,
                                      max_consecutive_failures=config.max_consecutive_failures) as client:
            reported: set[str] = set()

            async def check_endpoint() -> None:
                checks = await preflight(client, role="judge", option="--judge-model")
                reported.update(check.reported_model for check in checks if check.reported_model)

            async def chat(messages: list[dict]) -> str:
                return (await client.chat(messages, temperature=0.0, max_tokens=config.max_tokens)).text

            result = await work(chat, check_endpoint)
            return result, sorted(reported | client.reported_models)

    return asyncio.run(run())


def _command_line(config: JudgeConfig) -> list[str]:
    if config.command_line is not None:
        return list(config.command_line)
    argv = sys.argv
    return ["mmbu", "eval", "judge", *argv[argv.index("judge") + 1:]] if "judge" in argv else list(argv)
