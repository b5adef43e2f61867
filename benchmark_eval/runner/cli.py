"""`mmbu eval run`: ask a model every selected question of a release; append run records."""
from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
from pathlib import Path

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress as RichProgress, TextColumn, TimeElapsedColumn
from rich.table import Table

from mmbu.core.cli import ExitCode, InvalidInput
from mmbu.core.release import TASKS

from ..backends.base import Backend
from ..backends.openai_compat import DEFAULT_API_KEY_ENV, OpenAICompatBackend, OpenAICompatClient
from ..models.box_format import BoxFormat
from ..models.registry import ModelEntry, RegistryError, ad_hoc_entry, load_registry
from ..records import RecordsError
from ..release import ReleaseError, list_tasks
from ..tasks.prompts import PROMPT_VERSION
from ..tasks.spec import FORMS, TEMPLATES, parse_choice
from .core import Progress, RunConfig, RunLocked, Runner, completeness, run_lock
from .manifest import COMPLETENESS_FILE, RUN_FILE, build_manifest, read_previous, write_json_atomic
from .workers import OpenAIBackendRecipe, WorkerFailed, run_sharded


def resolve_model(name: str, box_format: str | None, registry_path: Path | None) -> ModelEntry:
    """The registry entry for `name`, or an ad-hoc one when `--box-format` is given for an unknown model."""
    try:
        registry = load_registry(registry_path)
    except RegistryError as exc:
        raise InvalidInput(str(exc)) from None
    entry = registry.find(name)
    if entry is None:
        if not box_format:
            raise click.UsageError(f"model '{name}' is not in the registry; give its box convention with "
                                   f"--box-format pixel|norm1000|norm1")
        return ad_hoc_entry(name, box_format)
    if box_format and box_format != entry.box_format.scale:
        entry = entry.model_copy(update={"box_format": BoxFormat(scale=box_format, order=entry.box_format.order)})
    return entry


def make_backend(kind: str, entry: ModelEntry, *, base_urls: list[str], api_key_env: str, served_model: str,
                 concurrency: int, timeout: float, max_attempts: int, retry_backoff: float,
                 tensor_parallel_size: int) -> Backend:
    if kind == "openai":
        client = OpenAICompatClient(base_urls, served_model, api_key_env=api_key_env, concurrency=concurrency,
                                    timeout_s=timeout, max_attempts=max_attempts, backoff_s=retry_backoff)
        return OpenAICompatBackend(client, entry.chat)
    if kind == "vllm":
        from ..backends.vllm_offline import VLLMOfflineBackend

        return VLLMOfflineBackend(entry, tensor_parallel_size=tensor_parallel_size)
    from ..backends.transformers_local import TransformersBackend

    return TransformersBackend(entry)


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
@click.option("--release", "release_dir", required=True, type=click.Path(path_type=Path, file_okay=False),
              help="The release directory (with data/<task>/*.parquet).")
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
@click.option("--batch-size", type=click.IntRange(1), default=256, show_default=True, help="Batch size for vllm/hf backends.")
@click.option("--tensor-parallel-size", type=click.IntRange(1), default=1, show_default=True, help="vLLM tensor parallelism.")
@click.option("--registry", "registry_path", type=click.Path(path_type=Path, dir_okay=False, exists=True), default=None,
              help="Another model registry YAML (default: the bundled one).")
@click.option("--out", "runs_dir", required=True, type=click.Path(path_type=Path, file_okay=False),
              help="Runs directory; records go to OUT/<model-slug>/predictions.jsonl.")
def run(release_dir: Path, model_name: str, base_urls: tuple[str, ...], backend_kind: str, api_key_env: str | None,
        served_model_name: str | None, concurrency: int, workers: int, tasks: str | None, forms: str | None, templates: str | None,
        limit: int | None, box_format: str | None, max_tokens: int | None, seed: int, timeout: float,
        max_attempts: int, retry_backoff: float, batch_size: int, tensor_parallel_size: int, registry_path: Path | None,
        runs_dir: Path) -> None:
    """Ask a model every selected question of a release; append one record per answer.

    Re-running the same command resumes: answers already recorded as ok (same request hash)
    are skipped and errors are asked again. Exit 0 when every expected record is ok, 1 when
    some are errors, 2 for bad usage or input.
    """
    console = Console(stderr=True)
    entry = resolve_model(model_name, box_format, registry_path)
    try:
        present = list_tasks(release_dir)
        selected_tasks = parse_choice(tasks, tuple(t for t in TASKS if t in present) if tasks is None else TASKS, "task")
        selected_forms = parse_choice(forms, FORMS, "form")
        selected_templates = parse_choice(templates, TEMPLATES, "template")
    except ReleaseError as exc:
        raise InvalidInput(str(exc)) from None
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    missing = [t for t in selected_tasks if t not in present]
    if missing:
        raise InvalidInput(f"{release_dir}: the release has no task {', '.join(missing)} (present: {', '.join(present)})")
    if workers > 1 and backend_kind != "openai":
        raise click.UsageError(f"--workers needs the openai backend; {backend_kind} runs one batch engine on this GPU")
    if backend_kind not in entry.backends:
        raise click.UsageError(f"{entry.name} cannot use backend '{backend_kind}' (registry: {', '.join(entry.backends)})")
    urls = [u.strip() for value in base_urls for u in value.split(",") if u.strip()]
    if backend_kind == "openai" and not urls:
        if not entry.default_base_url:
            raise click.UsageError("--base-url is required for the openai backend (e.g. http://localhost:8000/v1)")
        urls = [entry.default_base_url]
    key_env = api_key_env or DEFAULT_API_KEY_ENV
    needs_key = api_key_env is not None or (backend_kind == "openai" and entry.default_base_url in urls)
    if needs_key and not os.environ.get(key_env):
        raise click.UsageError(f"the API key variable {key_env} is not set")
    served = served_model_name or entry.served_name
    config = RunConfig(release_dir=release_dir, runs_dir=runs_dir, entry=entry, tasks=selected_tasks,
                       forms=selected_forms, templates=selected_templates, limit=limit,
                       max_tokens=max_tokens or entry.max_tokens, seed=seed, concurrency=concurrency,
                       batch_size=batch_size, backend_name=backend_kind)
    backend = make_backend(backend_kind, entry, base_urls=urls, api_key_env=key_env, served_model=served,
                           concurrency=concurrency, timeout=timeout, max_attempts=max_attempts,
                           retry_backoff=retry_backoff, tensor_parallel_size=tensor_parallel_size)
    recipe = OpenAIBackendRecipe(tuple(urls), served, key_env, timeout_s=timeout, max_attempts=max_attempts,
                                 backoff_s=retry_backoff, quirks=entry.chat) if workers > 1 else None
    started = time.time()
    generation = {"temperature": config.temperature, "max_tokens": config.max_tokens, "seed": seed}
    selection = {"tasks": list(selected_tasks), "forms": list(selected_forms), "templates": list(selected_templates),
                 "limit": limit}
    run_file = config.run_dir / RUN_FILE
    manifest_args = dict(release_dir=release_dir, entry=entry.model_dump(mode="json"), served_model=served,
                         backend=backend.describe() | {"workers": workers}, prompt_version=PROMPT_VERSION, generation=generation,
                         selection=selection, argv=["mmbu", "eval", "run", *sys.argv[sys.argv.index("run") + 1:]]
                         if "run" in sys.argv else sys.argv, started_at=started)
    config.run_dir.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(run_lock(config.run_dir))   # one writer per run directory
        except RunLocked as exc:
            raise InvalidInput(str(exc)) from None
        previous = read_previous(run_file)
        write_json_atomic(run_file, build_manifest(**manifest_args, finished_at=None, previous=previous))
        outcome = _execute(config, backend, console, recipe, workers)
        write_json_atomic(run_file, build_manifest(**manifest_args, finished_at=time.time(), previous=previous))
    if outcome.truncated_tail is not None:
        console.print(f"[yellow]{config.predictions}: removed a truncated last line left by an interrupted run; "
                      f"that request was asked again.[/]")
    rows = completeness(config.predictions, outcome.expected)
    write_json_atomic(config.run_dir / COMPLETENESS_FILE, {"model": entry.name, "prompt_version": PROMPT_VERSION,
                                                          "configs": rows})
    console.print(completeness_table(rows))
    expected = sum(r["expected"] for r in rows)
    ok = sum(r["ok"] for r in rows)
    console.print(f"{ok}/{expected} ok; records in {config.predictions}")
    raise SystemExit(ExitCode.OK if ok == expected else ExitCode.ITEMS_FAILED)


def _execute(config: RunConfig, backend: Backend, console: Console, recipe: OpenAIBackendRecipe | None = None,
             workers: int = 1):
    columns = (TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
               TextColumn("ok {task.fields[ok]} · error {task.fields[error]} · skipped {task.fields[skipped]} · "
                          "retries {task.fields[retries]}"), TimeElapsedColumn())
    client = getattr(backend, "client", None)
    with RichProgress(*columns, console=console, transient=False) as bar:
        handle = bar.add_task(config.entry.name, total=None, ok=0, error=0, skipped=0, retries=0)

        last = [0.0]

        def update(progress: Progress, force: bool = False) -> None:
            now = time.monotonic()
            if not force and now - last[0] < 0.1:   # the bar redraws at 10 Hz anyway
                return
            last[0] = now
            retries = max(progress.retries, client.counters["retries"] if client is not None else 0)
            bar.update(handle, total=progress.expected or None, completed=progress.done, ok=progress.ok,
                       error=progress.error, skipped=progress.skipped, retries=retries)

        progress = Progress(on_change=update)

        async def go():
            try:
                return await Runner(config, backend, progress, take_lock=False).run()
            finally:
                await backend.aclose()

        try:
            if recipe is not None:
                outcome = run_sharded(config, recipe, workers, progress)
            else:
                outcome = asyncio.run(go())
        except WorkerFailed as exc:
            raise click.ClickException(str(exc)) from None
        except ReleaseError as exc:
            raise InvalidInput(str(exc)) from None
        except RecordsError as exc:
            raise InvalidInput(f"{exc}; move the file aside or repair that line to resume") from None
        update(progress, force=True)
    return outcome
