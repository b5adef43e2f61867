"""``mmbu eval judge``: the command over `run_judge(JudgeConfig)` (judge/api.py): verdicts for a run's open
answers, cached beside the run."""
from __future__ import annotations

import contextlib
from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from mmbu.benchmark_eval.backends.bounded_body import DEFAULT_MIN_RESPONSE_RATE
from mmbu.benchmark_eval.backends.openai_compat import (DEFAULT_API_KEY_ENV, DEFAULT_MAX_CONSECUTIVE_FAILURES,
                                                        CircuitOpen)
from mmbu.benchmark_eval.backends.preflight import PreflightError
from mmbu.benchmark_eval.judge.api import JudgeConfig, run_judge
from mmbu.benchmark_eval.judge.prompt import DEFAULT_JUDGE_MODEL
from mmbu.benchmark_eval.judge.run import DEFAULT_VERDICT_ATTEMPTS, JudgeSummary
from mmbu.benchmark_eval.rundir import RunInputError
from mmbu.core.cli import ExitCode, InvalidInput
from mmbu.core.interrupt import on_interrupt, resume_command
from mmbu.core.progress import PlainProgress, is_live, output_console
from mmbu.core.runs import RunFile


def _report(console: Console, summary: JudgeSummary) -> None:
    console.print(f"{summary.judge_model}: {summary.open_records} open answers — {summary.precheck} equal to the gold "
                  f"answer (pre-check), {summary.cached} pairs already judged, {summary.judged} judged now, "
                  f"{summary.errors} judge errors")
    for message in summary.error_messages[:10]:
        console.print(f"[yellow]judge error:[/] {escape(message)}")
    if len(summary.error_messages) > 10:
        console.print(f"[yellow]… and {len(summary.error_messages) - 10} more judge errors[/]")


@contextlib.contextmanager
def _judge_progress(console: Console, counts: dict[str, int]):
    """The `run_judge` progress callback: a rich bar on a terminal, plain lines elsewhere; `counts` follows both."""
    if not is_live(console):
        plains: list[PlainProgress] = []

        def plain(model: str):
            line = PlainProgress(f"judging with {model}", unit="pairs/s")
            plains.append(line)
            state = {"done": 0, "total": 0}

            def start(total: int) -> None:
                state["total"] = counts["total"] = total
                line.update(0, total, force=True)

            def advance(done: int) -> None:
                state["done"] += done
                counts["done"] = state["done"]
                line.update(state["done"], state["total"])

            return start, advance

        try:
            yield plain
        finally:
            for line in plains:
                line.close()
        return
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                  console=console, transient=True) as bar:
        def progress(model: str):
            task = bar.add_task(f"judging with {model}", total=None)

            def start(total: int) -> None:
                counts["total"] = total
                bar.update(task, total=total)

            def advance(done: int) -> None:
                counts["done"] += done
                bar.advance(task, done)

            return start, advance

        yield progress


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
              help="Times to ask again when the reply has no VERDICT (or OPTION) line, before recording an error.")
@click.option("--timeout", default=120.0, show_default=True, type=click.FloatRange(0.1),
              help="Seconds one judge request may take in all (connect, wait, answer).")
@click.option("--retry-backoff", type=click.FloatRange(0), default=1.0, show_default=True,
              help="Base in seconds of the jittered exponential backoff between attempts (Retry-After wins).")
@click.option("--min-response-rate", default=DEFAULT_MIN_RESPONSE_RATE, show_default=True, type=click.FloatRange(0),
              help="Bytes/s below which an answer still arriving is cut (averaged over 10 s; 0: no minimum).")
@click.option("--extract-closed", is_flag=True,
              help="Also ask which option each closed reply the strict parser cannot read gives (assisted score; "
                   "the strict score is unchanged).")
@click.option("--extractor-model", default=None, help="Model that extracts closed answers (default: --judge-model).")
@click.option("--max-consecutive-failures", type=click.IntRange(0), default=DEFAULT_MAX_CONSECUTIVE_FAILURES,
              show_default=True, help="Stop when this many judge requests in a row fail in transport or with a 5xx "
                                      "(each after its retries); 0 never stops.")
@click.option("--no-preflight", is_flag=True, help="Skip asking the judge server for its models and one tiny question.")
def judge(run_dir: Path, judge_model: str, judge_base_url: str, api_key_env: str, release: Path | None,
          second_judge_model: str | None, second_judge_base_url: str | None, concurrency: int, max_tokens: int,
          verdict_attempts: int, timeout: float, retry_backoff: float, min_response_rate: float, extract_closed: bool,
          extractor_model: str | None, max_consecutive_failures: int, no_preflight: bool) -> None:
    """Judge the open answers of RUN_DIR (RUNS_DIR/<model>) against the gold answers.

    \b
    Answers equal to the gold answer or one of its aliases (after normalisation) are
    equivalent without a call. The rest go to the judge at temperature 0, which sees
    only the answer and the gold answer and ends with `VERDICT: EQUIVALENT` or
    `VERDICT: NOT_EQUIVALENT`. Verdicts are cached in RUN_DIR/judgements.jsonl by
    (answer, gold, judge model, prompt version), so re-running only asks what is new
    or failed. With --extract-closed, closed replies the strict parser cannot
    read are also shown, with their options, to the extractor (a fixed, versioned
    prompt that names one option or none); `mmbu eval score` then reports an
    assisted F1 beside the strict one. Before asking, the judge server is asked what
    it serves and one tiny question (a refused connection, a model it does not
    serve, an authentication error or a 5xx: exit 2). Exit 1 when some answers got
    no verdict (judge errors) or no extraction.
    """
    console = output_console()
    config = JudgeConfig(run_dir=run_dir, judge_base_url=judge_base_url, judge_model=judge_model,
                         api_key_env=api_key_env, release_dir=release, second_judge_model=second_judge_model,
                         second_judge_base_url=second_judge_base_url, concurrency=concurrency, max_tokens=max_tokens,
                         verdict_attempts=verdict_attempts, timeout_s=timeout, retry_backoff=retry_backoff,
                         min_response_rate=min_response_rate,
                         extract_closed=extract_closed, extractor_model=extractor_model,
                         max_consecutive_failures=max_consecutive_failures, preflight=not no_preflight)
    counts = {"done": 0, "total": 0}
    on_interrupt(lambda: f"judged {counts['done']:,} of {counts['total']:,} pairs this run; every verdict had is "
                         f"cached in {run_dir / RunFile.JUDGEMENTS}")
    try:
        with _judge_progress(console, counts) as progress:
            report = run_judge(config, progress)
    except RunInputError as exc:
        raise InvalidInput(str(exc)) from None
    except PreflightError as exc:
        raise InvalidInput(str(exc)) from None
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    except CircuitOpen as exc:
        console.print(f"stopped: {exc}", markup=False, highlight=False)
        console.print(f"judged {counts['done']:,} of {counts['total']:,} pairs before it; their verdicts are cached in "
                      f"{run_dir / RunFile.JUDGEMENTS}", markup=False, highlight=False)
        console.print(f"when the judge server is back, resume with:\n  {resume_command()}", markup=False,
                      highlight=False)
        raise SystemExit(ExitCode.ITEMS_FAILED) from None
    for summary in report.summaries:
        _report(console, summary)
    if report.extraction is not None:
        x = report.extraction
        console.print(f"{x.extractor_model} (extraction): {x.unparseable} closed answers the strict parser cannot read — "
                      f"{x.cached} already extracted, {x.extracted} extracted now, {x.errors} extraction errors")
        for message in x.error_messages[:10]:
            console.print(f"[yellow]extraction error:[/] {message}")
    if report.agreement is not None:
        agreement = report.agreement
        kappa = "undefined" if agreement["kappa"] is None else f"{agreement['kappa']:.3f}"
        flip = "—" if agreement["flip_rate"] is None else f"{agreement['flip_rate']:.3f}"
        console.print(f"agreement over {agreement['n']} pairs: Cohen's kappa {kappa}, flip rate {flip} "
                      f"(written to {report.agreement_file})")
    raise SystemExit(report.exit_code)
