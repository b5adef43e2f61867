"""`mmbu eval run`: the command over `run_eval(EvalConfig)` (runner/api.py): options in, progress bar and
completeness table out."""
from __future__ import annotations

import time
from pathlib import Path

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress as RichProgress, TextColumn, TimeElapsedColumn
from rich.table import Table

from mmbu.benchmark_eval.backends.bounded_body import DEFAULT_MAX_RESPONSE_BYTES
from mmbu.benchmark_eval.backends.openai_compat import DEFAULT_API_KEY_ENV, DEFAULT_MAX_CONSECUTIVE_FAILURES
from mmbu.benchmark_eval.backends.preflight import PreflightError
from mmbu.benchmark_eval.models.registry import RegistryError, load_registry, model_slug
from mmbu.benchmark_eval.records import RecordsError
from mmbu.benchmark_eval.release import ReleaseError
from mmbu.benchmark_eval.runner.api import EvalConfig, EvalReport, EvalUsageError, RunStopped, run_eval
from mmbu.benchmark_eval.runner.core import Progress, RunLocked
from mmbu.benchmark_eval.runner.workers import WorkerFailed
from mmbu.core.cli import ExitCode, InvalidInput
from mmbu.core.interrupt import on_interrupt, resume_command
from mmbu.core.progress import PlainProgress, clock_text, is_live, output_console
from mmbu.core.release import TASKS
from mmbu.core.runs import RunFile


def completeness_table(rows: list[dict]) -> Table:
    table = Table(title="Completeness (expected / present / ok per configuration)")
    for column in ("task", "form", "template", "expected", "present", "ok", "error", "reasons"):
        table.add_column(column, justify="right" if column in ("expected", "present", "ok", "error") else "left")
    for row in rows:
        style = None if row["ok"] == row["expected"] else "yellow"
        reasons = ", ".join(f"{k}: {v}" for k, v in sorted(row["reasons"].items()))
        table.add_row(row["task"], row["form"], row["template"], str(row["expected"]), str(row["present"]),
                      str(row["ok"]), str(row["error"]), reasons, style=style)
    return table


@click.command("run", context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--release", "release_dir", required=True, metavar="DIR|hf://OWNER/NAME@REV",
              help="The release: a directory (with data/<task>/*.parquet), or a Hugging Face dataset repository "
                   "(hf://OWNER/NAME@REVISION, or OWNER/NAME with --revision), downloaded and checked against its "
                   "SHA256SUMS.")
@click.option("--revision", "release_revision", default=None,
              help="The Hub revision (commit sha, branch or tag) of a --release OWNER/NAME.")
@click.option("--release-cache", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="Where a Hub release is downloaded (default: huggingface_hub's cache, HF_HUB_CACHE).")
@click.option("--model", "model_name", required=True,
              help="A registry name, paper name or HF id (e.g. Qwen/Qwen2.5-VL-7B-Instruct); others need --box-format.")
@click.option("--base-url", "base_urls", multiple=True,
              help="OpenAI-compatible base URL including /v1; repeat or comma-separate to share the load.")
@click.option("--backend", "backend_kind", type=click.Choice(["openai", "vllm", "hf"]), default="openai",
              show_default=True, help="openai: a server or API; vllm / hf: in-process on this machine's GPU.")
@click.option("--api-key-env", default=None, metavar="VAR",
              help=f"Environment variable holding the API key (default {DEFAULT_API_KEY_ENV}, optional for local servers).")
@click.option("--served-model-name", default=None, help="The model name the server expects (default: from the registry).")
@click.option("--concurrency", default=32, show_default=True, type=click.IntRange(1, 4096),
              help="Maximum requests in flight (adapts down on 429s).")
@click.option("--workers", default=1, show_default=True, type=click.IntRange(1, 64),
              help="Processes sharing the rows and --concurrency (openai backend): for thousands of requests a "
                   "second or large images, up to one per core.")
@click.option("--tasks", default=None, help=f"Comma-separated tasks (default all present): {', '.join(TASKS)}.")
@click.option("--forms", default=None, help="Comma-separated forms: closed,open (default both).")
@click.option("--templates", default=None, help="Comma-separated templates: no_context,modality,full_context (default all).")
@click.option("--limit", type=click.IntRange(1), default=None, help="Only the first N rows of each task.")
@click.option("--box-format", type=click.Choice(["pixel", "norm1000", "norm1"]), default=None,
              help="Box convention of a model outside the registry (required for one).")
@click.option("--max-tokens", type=click.IntRange(1), default=None, help="Answer length cap (default from the registry).")
@click.option("--seed", type=int, default=0, show_default=True, help="Sampling seed sent with every request.")
@click.option("--timeout", type=click.FloatRange(0.1), default=120.0, show_default=True, help="Per-request timeout in seconds.")
@click.option("--max-attempts", type=click.IntRange(1), default=6, show_default=True,
              help="Attempts per request on 429/5xx/timeouts before recording an error.")
@click.option("--retry-backoff", type=click.FloatRange(0), default=1.0, show_default=True,
              help="Base in seconds of the jittered exponential backoff between attempts (Retry-After wins).")
@click.option("--max-response-mib", type=click.FloatRange(0.01), default=DEFAULT_MAX_RESPONSE_BYTES / 2**20,
              show_default=True, help="Largest answer kept, on the wire and inflated; a larger one is that request's "
                                      "error (memory stays below this times --concurrency).")
@click.option("--batch-size", type=click.IntRange(1), default=256, show_default=True, help="Batch size for vllm/hf backends.")
@click.option("--tensor-parallel-size", type=click.IntRange(1), default=1, show_default=True, help="vLLM tensor parallelism.")
@click.option("--registry", "registry_path", type=click.Path(path_type=Path, dir_okay=False, exists=True), default=None,
              help="Another model registry YAML (default: the bundled one).")
@click.option("--image-cache", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="Keep prepared (resized, outlined, encoded) images here and reuse them: resumed runs and models "
                   "that prepare images alike skip that work. Safe to share and to delete.")
@click.option("--max-consecutive-failures", type=click.IntRange(0), default=DEFAULT_MAX_CONSECUTIVE_FAILURES,
              show_default=True, help="Stop the run when this many requests in a row fail in transport or with a 5xx "
                                      "(each after its retries); 0 never stops.")
@click.option("--no-preflight", is_flag=True,
              help="Skip asking each endpoint for its models and one tiny question before the run.")
@click.option("--out", "runs_dir", required=True, type=click.Path(path_type=Path, file_okay=False),
              help="Runs directory; records go to OUT/<model-slug>/predictions.jsonl.")
def run(release_dir: str, release_revision: str | None, release_cache: Path | None, model_name: str,
        base_urls: tuple[str, ...], backend_kind: str, api_key_env: str | None,
        served_model_name: str | None, concurrency: int, workers: int, tasks: str | None, forms: str | None, templates: str | None,
        limit: int | None, box_format: str | None, max_tokens: int | None, seed: int, timeout: float,
        max_attempts: int, retry_backoff: float, max_response_mib: float, batch_size: int, tensor_parallel_size: int,
        registry_path: Path | None, image_cache: Path | None, max_consecutive_failures: int, no_preflight: bool,
        runs_dir: Path) -> None:
    """Ask a model every selected question of a release; append one record per answer.

    Before the run each endpoint is asked what it serves and one tiny question: a refused
    connection, a model it does not serve, an authentication error or a 5xx stops here
    (exit 2). Re-running the same command resumes: answers already recorded as ok (same
    request hash) are skipped and errors are asked again. Exit 0 when every expected
    record is ok, 1 when some are errors (or the endpoint failed too many requests in a
    row), 2 for bad usage or input, 130/143 when interrupted.
    """
    console = output_console()
    config = EvalConfig(
        release_dir=release_dir, runs_dir=runs_dir, model=model_name, base_urls=base_urls, backend=backend_kind,
        api_key_env=api_key_env, served_model_name=served_model_name, concurrency=concurrency, workers=workers,
        tasks=_selected(tasks), forms=_selected(forms), templates=_selected(templates), limit=limit,
        box_format=box_format, max_tokens=max_tokens, seed=seed, timeout=timeout, max_attempts=max_attempts,
        retry_backoff=retry_backoff, max_response_bytes=int(max_response_mib * 2**20), batch_size=batch_size,
        tensor_parallel_size=tensor_parallel_size,
        registry_path=registry_path, image_cache=image_cache, max_consecutive_failures=max_consecutive_failures,
        preflight=not no_preflight, release_revision=release_revision, release_cache=release_cache)
    try:
        report = _run_with_bar(config, console)
    except EvalUsageError as exc:
        raise click.UsageError(str(exc)) from None
    except (ReleaseError, RegistryError, RunLocked, PreflightError) as exc:
        raise InvalidInput(str(exc)) from None
    except RunStopped as stopped:
        console.print(f"stopped: {stopped.cause}", markup=False, highlight=False)
        console.print(saved_text(stopped.report.progress, stopped.report.predictions), markup=False, highlight=False)
        console.print(f"when the server is back, resume with:\n  {resume_command()}", markup=False, highlight=False)
        raise SystemExit(ExitCode.ITEMS_FAILED) from None
    except RecordsError as exc:
        raise InvalidInput(f"{exc}; move the file aside or repair that line to resume") from None
    except WorkerFailed as exc:
        raise click.ClickException(str(exc)) from None
    for note in report.endpoint_notes:
        console.print(f"note: {note}", markup=False, highlight=False)
    if report.truncated_tail:
        console.print(f"[yellow]{report.predictions}: removed a truncated last line left by an interrupted run; "
                      f"that request was asked again.[/]")
    console.print(completeness_table(report.completeness))
    console.print(f"{report.ok}/{report.expected} ok; records in {report.predictions}")
    if image_cache is not None:
        console.print(f"image cache {image_cache}: {report.progress.images_reused:,} images reused, "
                      f"{report.progress.images_stored:,} prepared and stored")
    raise SystemExit(report.exit_code)


def _selected(value: str | None) -> tuple[str, ...] | None:
    """A comma-separated option as the config's tuple (None: the default selection)."""
    return None if value is None else tuple(value.split(","))


def pace_text(progress: Progress, now: float | None = None) -> str:
    """"12.3 req/s · 4,567 tok/s · ETA 01:02:03" from the answers so far (tokens from the usage fields)."""
    per_s, tokens_s, eta = progress.rates(now)
    return f"{per_s:.1f} req/s · {tokens_s:,.0f} tok/s · ETA {clock_text(eta)}"


def saved_text(progress: Progress, predictions: Path) -> str:
    """What a run that stopped early had done: its counts and where they are."""
    return (f"saved: {progress.ok:,} answers ok and {progress.error:,} errors this run, {progress.skipped:,} already "
            f"there, of {progress.expected:,} expected so far; records in {predictions}")


def _slug(config: EvalConfig) -> str:
    try:
        entry = load_registry(config.registry_path).find(config.model)
    except RegistryError:
        entry = None
    return entry.slug if entry is not None else model_slug(config.model)


def _run_with_bar(config: EvalConfig, console: Console) -> EvalReport:
    """`run_eval` behind a rich progress bar (redrawn at most 10 times a second) on a terminal, plain progress lines
    elsewhere; an interrupt reports the counts so far."""
    last_seen: list[Progress] = [Progress()]
    on_interrupt(lambda: saved_text(last_seen[0], config.runs_dir / _slug(config) / RunFile.PREDICTIONS))
    if not is_live(console):
        with PlainProgress(f"eval run {config.model}", unit="req/s") as plain:
            def line(progress: Progress, force: bool = False) -> None:
                last_seen[0] = progress
                plain.update(progress.done, progress.expected or None,
                             counts={"ok": progress.ok, "error": progress.error, "skipped": progress.skipped,
                                     "retries": progress.retries}, answered=progress.ok + progress.error,
                             tokens=progress.prompt_tokens + progress.completion_tokens, force=force)

            report = run_eval(config, on_progress=line)
            line(report.progress)
        return report
    columns = (TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
               TextColumn("ok {task.fields[ok]} · error {task.fields[error]} · skipped {task.fields[skipped]} · "
                          "retries {task.fields[retries]} · {task.fields[pace]}"), TimeElapsedColumn())
    with RichProgress(*columns, console=console, transient=False) as bar:
        handle = bar.add_task(config.model, total=None, ok=0, error=0, skipped=0, retries=0, pace=pace_text(Progress()))
        last = [0.0]

        def update(progress: Progress, force: bool = False) -> None:
            last_seen[0] = progress
            now = time.monotonic()
            if not force and now - last[0] < 0.1:  # the bar redraws at 10 Hz anyway
                return
            last[0] = now
            bar.update(handle, total=progress.expected or None, completed=progress.done, ok=progress.ok,
                       error=progress.error, skipped=progress.skipped, retries=progress.retries,
                       pace=pace_text(progress, now))

        report = run_eval(config, on_progress=update)
        update(report.progress, force=True)
    return report
