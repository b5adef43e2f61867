"""``mmbu eval judge``: verdicts for a run's open answers, cached beside the run."""
from __future__ import annotations

import asyncio
from pathlib import Path

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from mmbu.core.cli import ExitCode, InvalidInput

from ..backends.openai_compat import DEFAULT_API_KEY_ENV, OpenAICompatClient
from ..scoring.output import write_json
from ..scoring.rundir import RunInputError, load_gold, open_run
from .agreement import judge_agreement
from .cache import JUDGEMENTS_FILE, VerdictCache
from .prompt import DEFAULT_JUDGE_MODEL, JUDGE_PROMPT_VERSION
from .run import DEFAULT_VERDICT_ATTEMPTS, JudgeItem, JudgeSummary, judge_items, open_items, write_judge_file

AGREEMENT_FILE = "judge_agreement.json"


async def _judge_with(items: list[JudgeItem], cache: VerdictCache, model: str, base_url: str, api_key_env: str,
                      concurrency: int, max_tokens: int, attempts: int, console: Console) -> JudgeSummary:
    async with OpenAICompatClient(base_url, model, api_key_env=api_key_env, concurrency=concurrency) as client:
        async def chat(messages: list[dict]) -> str:
            return (await client.chat(messages, temperature=0.0, max_tokens=max_tokens)).text

        with Progress(TextColumn(f"judging with {model}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                      console=console, transient=True) as progress:
            task = progress.add_task("judge", total=None)
            return await judge_items(items, chat, cache, model, verdict_attempts=attempts,
                                     on_start=lambda total: progress.update(task, total=total),
                                     progress=lambda done: progress.advance(task, done))


def _report(console: Console, summary: JudgeSummary) -> None:
    console.print(f"{summary.judge_model}: {summary.open_records} open answers — {summary.precheck} equal to the gold "
                  f"answer (pre-check), {summary.cached} pairs already judged, {summary.judged} judged now, "
                  f"{summary.errors} judge errors")
    for message in summary.error_messages[:10]:
        console.print(f"[yellow]judge error:[/] {message}")
    if len(summary.error_messages) > 10:
        console.print(f"[yellow]… and {len(summary.error_messages) - 10} more judge errors[/]")


@click.command("judge")
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option("--judge-model", default=DEFAULT_JUDGE_MODEL, show_default=True,
              help="Judge model name as the server knows it (the paper: Qwen3-32B).")
@click.option("--judge-base-url", required=True, help="OpenAI-compatible base URL of the judge, e.g. http://host:8000/v1.")
@click.option("--api-key-env", default=DEFAULT_API_KEY_ENV, show_default=True,
              help="Environment variable holding the judge server's API key (unset: no key sent).")
@click.option("--release", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Release directory (default: the one named in the run's run.json).")
@click.option("--second-judge-model", default=None, help="A second judge for an agreement report (kappa, flip rate).")
@click.option("--second-judge-base-url", default=None, help="Base URL of the second judge (default: --judge-base-url).")
@click.option("--concurrency", default=16, show_default=True, type=click.IntRange(min=1), help="Requests in flight.")
@click.option("--max-tokens", default=2048, show_default=True, type=click.IntRange(min=16),
              help="Judge reply budget (reasoning judges think before the verdict line).")
@click.option("--verdict-attempts", default=DEFAULT_VERDICT_ATTEMPTS, show_default=True, type=click.IntRange(min=1),
              help="Times to ask again when the reply has no VERDICT line, before recording a judge error.")
def judge(run_dir: Path, judge_model: str, judge_base_url: str, api_key_env: str, release: Path | None,
          second_judge_model: str | None, second_judge_base_url: str | None, concurrency: int, max_tokens: int,
          verdict_attempts: int) -> None:
    """Judge the open answers of RUN_DIR (RUNS_DIR/<model>) against the gold answers.

    \b
    Answers equal to the gold answer or one of its aliases (after normalisation) are
    equivalent without a call. The rest go to the judge at temperature 0, which sees
    only the answer and the gold answer and ends with `VERDICT: EQUIVALENT` or
    `VERDICT: NOT_EQUIVALENT`. Verdicts are cached in RUN_DIR/judgements.jsonl by
    (answer, gold, judge model, prompt version), so re-running only asks what is new
    or failed. Exit 1 when some answers got no verdict (judge errors).
    """
    console = Console(stderr=True)
    try:
        run = open_run(run_dir, release)
        items = open_items(run, load_gold(run.release_dir))
    except RunInputError as exc:
        raise InvalidInput(str(exc)) from None
    if second_judge_model == judge_model:
        raise click.UsageError("--second-judge-model must differ from --judge-model")
    cache = VerdictCache(run.path / JUDGEMENTS_FILE)
    settings = dict(api_key_env=api_key_env, concurrency=concurrency, max_tokens=max_tokens,
                    attempts=verdict_attempts, console=console)
    summary = asyncio.run(_judge_with(items, cache, judge_model, judge_base_url, **settings))
    write_judge_file(run.path, judge_model, JUDGE_PROMPT_VERSION, second_judge_model)
    _report(console, summary)
    errors = summary.errors
    if second_judge_model:
        second = asyncio.run(_judge_with(items, cache, second_judge_model, second_judge_base_url or judge_base_url,
                                         **settings))
        _report(console, second)
        errors += second.errors
        agreement = judge_agreement(cache, judge_model, second_judge_model, JUDGE_PROMPT_VERSION)
        write_json(run.path / AGREEMENT_FILE, agreement)
        kappa = "undefined" if agreement["kappa"] is None else f"{agreement['kappa']:.3f}"
        flip = "—" if agreement["flip_rate"] is None else f"{agreement['flip_rate']:.3f}"
        console.print(f"agreement over {agreement['n']} pairs: Cohen's kappa {kappa}, flip rate {flip} "
                      f"(written to {run.path / AGREEMENT_FILE})")
    if errors:
        raise SystemExit(ExitCode.ITEMS_FAILED)
