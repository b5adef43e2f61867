"""`run_eval(EvalConfig)`: ask a model every selected question of a release, from Python.

`mmbu eval run` is a thin wrapper over it (as `mmbu build` is over `run_build`):

    from mmbu.benchmark_eval.runner.api import EvalConfig, run_eval
    report = run_eval(EvalConfig(release_dir=Path("data/release"), runs_dir=Path("runs"),
                                 model="Qwen/Qwen2.5-VL-7B-Instruct", base_urls=("http://gpu:8000/v1",)))
    report.ok, report.expected, report.completeness   # records in report.predictions

It resolves the model (registry entry, box convention), checks the selection against the release, states the
backend's options once (`BackendRecipe`, which builds this process's backend and each worker's), holds the run
directory's lock, records `run.json` before and after, runs the `Runner` (or its worker processes) and writes
`completeness.json`. Unusable input raises `ReleaseError`, `RegistryError`,
`RecordsError` or `RunLocked` (files) or `EvalUsageError` (options), each one sentence naming the cause; an
endpoint that cannot serve (refused, wrong model name, authentication, 5xx) raises `PreflightError` before any
question is asked; one that fails `max_consecutive_failures` requests in a row during the run raises `RunStopped`
with what was saved.
"""
from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from mmbu.benchmark_eval.backends.base import Backend
from mmbu.benchmark_eval.backends.bounded_body import DEFAULT_MAX_RESPONSE_BYTES
from mmbu.benchmark_eval.backends.openai_compat import (DEFAULT_API_KEY_ENV, DEFAULT_MAX_CONSECUTIVE_FAILURES,
                                                        CircuitOpen, OpenAICompatClient)
from mmbu.benchmark_eval.backends.preflight import EndpointCheck, preflight
from mmbu.benchmark_eval.backends.recipe import BackendKind, BackendRecipe
from mmbu.benchmark_eval.models.box_format import BoxFormat
from mmbu.benchmark_eval.models.registry import ModelEntry, ad_hoc_entry, load_registry
from mmbu.benchmark_eval.release import ReleaseError, list_tasks
from mmbu.benchmark_eval.release_source import resolve_release
from mmbu.benchmark_eval.runner.core import Progress, RunConfig, Runner, completeness, run_lock
from mmbu.benchmark_eval.runner.manifest import build_manifest, read_previous, write_json_atomic
from mmbu.benchmark_eval.runner.workers import run_sharded
from mmbu.benchmark_eval.tasks.image_cache import remove_stale_temporaries
from mmbu.benchmark_eval.tasks.prompts import PROMPT_VERSION
from mmbu.benchmark_eval.tasks.spec import parse_choice
from mmbu.core.cli import ExitCode
from mmbu.core.release import FORMS, TASKS, TEMPLATES
from mmbu.core.runs import RunFile
from mmbu.core.secrets import redact_url


class EvalUsageError(ValueError):
    """Options that cannot work together (an unknown model without a box convention, a missing base URL ...)."""


@dataclass(frozen=True)
class EvalConfig:
    """One `mmbu eval run`: every option of the command, with its defaults."""

    release_dir: Path | str  # a folder, or hf://OWNER/NAME@REVISION (release_source.py)
    runs_dir: Path  # records go to runs_dir/<model slug>/predictions.jsonl
    model: str  # a registry name, paper name or HF id; others need box_format
    base_urls: tuple[str, ...] = ()  # OpenAI-compatible base URLs including /v1 (default: the registry's)
    backend: BackendKind = "openai"
    api_key_env: str | None = None  # environment variable of the API key (default OPENAI_API_KEY, optional)
    served_model_name: str | None = None  # the name the server expects (default: the registry's)
    concurrency: int = 32  # requests in flight (adapts down on 429s)
    workers: int = 1  # processes sharing the rows and the concurrency (openai backend)
    tasks: tuple[str, ...] | None = None  # None: every task the release has
    forms: tuple[str, ...] | None = None  # None: closed and open
    templates: tuple[str, ...] | None = None  # None: all three
    limit: int | None = None  # only the first N rows of each task
    box_format: str | None = None  # pixel | norm1000 | norm1 for a model outside the registry
    max_tokens: int | None = None  # default: the registry's
    seed: int = 0
    timeout: float = 120.0  # seconds per request
    max_attempts: int = 6
    retry_backoff: float = 1.0
    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES  # larger answers (on the wire or inflated) are errors
    batch_size: int = 256  # vllm / hf backends
    tensor_parallel_size: int = 1  # vllm
    registry_path: Path | None = None  # default: the bundled registry
    image_cache: Path | None = None  # prepared images kept on disk for later runs and models that prepare alike
    command_line: tuple[str, ...] | None = None  # recorded in run.json (secrets removed); default: this process's
    max_consecutive_failures: int = DEFAULT_MAX_CONSECUTIVE_FAILURES  # requests failing in a row that stop the run (0: never)
    preflight: bool = True  # ask each endpoint what it serves and one tiny question before the run (openai backend)
    release_revision: str | None = None  # with release_dir OWNER/NAME: the Hub revision (commit, branch, tag)
    release_cache: Path | None = None  # where a Hub release is downloaded (default: huggingface_hub's cache)


@dataclass
class EvalReport:
    """What a run left: the completeness of every configuration and where the records are."""

    run_dir: Path
    predictions: Path
    completeness: list[dict] = field(default_factory=list)
    progress: Progress = field(default_factory=Progress)
    truncated_tail: bool = False  # an interrupted run had left half a line; it was removed and asked again
    endpoint_notes: list[str] = field(default_factory=list)  # what the preflight noticed that did not stop the run

    @property
    def expected(self) -> int:
        return sum(row["expected"] for row in self.completeness)

    @property
    def ok(self) -> int:
        return sum(row["ok"] for row in self.completeness)

    @property
    def exit_code(self) -> ExitCode:
        return ExitCode.OK if self.ok == self.expected else ExitCode.ITEMS_FAILED


class RunStopped(Exception):
    """The endpoint failed `max_consecutive_failures` requests in a row; the run stopped with what it had saved."""

    def __init__(self, cause: str, report: EvalReport) -> None:
        super().__init__(cause)
        self.cause, self.report = cause, report


def resolve_model(name: str, box_format: str | None, registry_path: Path | None) -> ModelEntry:
    """The registry entry for `name`, or an ad-hoc one when `box_format` is given for an unknown model."""
    registry = load_registry(registry_path)
    entry = registry.find(name)
    if entry is None:
        if not box_format:
            raise EvalUsageError(f"model '{name}' is not in the registry{registry.did_you_mean(name)} "
                                 f"(`mmbu eval models` lists them); for a model outside it, give its box convention "
                                 f"with --box-format pixel|norm1000|norm1")
        return ad_hoc_entry(name, box_format)
    if box_format and box_format != entry.box_format.scale:
        entry = entry.model_copy(update={"box_format": BoxFormat(scale=box_format, order=entry.box_format.order)})
    return entry


def _selection(config: EvalConfig) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """The (tasks, forms, templates) to ask, checked against the release and the options' vocabularies."""
    present = list_tasks(config.release_dir)
    try:
        tasks = parse_choice(config.tasks, tuple(t for t in TASKS if t in present) if config.tasks is None else TASKS,
                             "task")
        forms = parse_choice(config.forms, FORMS, "form")
        templates = parse_choice(config.templates, TEMPLATES, "template")
    except ValueError as exc:
        raise EvalUsageError(str(exc)) from None
    missing = [t for t in tasks if t not in present]
    if missing:
        raise ReleaseError(f"{config.release_dir}: the release has no task {', '.join(missing)} "
                           f"(present: {', '.join(present)})")
    return tasks, forms, templates


def _endpoint(config: EvalConfig, entry: ModelEntry) -> tuple[list[str], str]:
    """The base URLs and the API key variable, checked (a hosted API needs its key set)."""
    if config.workers > 1 and config.backend != "openai":
        raise EvalUsageError(f"--workers needs the openai backend; {config.backend} runs one batch engine on this GPU")
    if config.backend not in entry.backends:
        raise EvalUsageError(f"{entry.name} cannot use backend '{config.backend}' (registry: {', '.join(entry.backends)})")
    urls = [u.strip() for value in config.base_urls for u in value.split(",") if u.strip()]
    if config.backend == "openai" and not urls:
        if not entry.default_base_url:
            raise EvalUsageError("--base-url is required for the openai backend (e.g. http://localhost:8000/v1)")
        urls = [entry.default_base_url]
    key_env = config.api_key_env or DEFAULT_API_KEY_ENV
    needs_key = config.api_key_env is not None or (config.backend == "openai" and entry.default_base_url in urls)
    if needs_key and not os.environ.get(key_env):
        raise EvalUsageError(f"the API key variable {key_env} is not set")
    return urls, key_env


def _command_line(config: EvalConfig) -> list[str]:
    if config.command_line is not None:
        return list(config.command_line)
    argv = sys.argv
    return ["mmbu", "eval", "run", *argv[argv.index("run") + 1:]] if "run" in argv else list(argv)


def run_eval(config: EvalConfig, on_progress: Callable[[Progress], None] | None = None) -> EvalReport:
    """Ask the model every selected question not yet answered ok; returns the completeness of the run.

    Re-running the same config resumes: answers already recorded as ok (same request hash) are skipped and
    errors are asked again. `on_progress` is called with the counters after every record.
    """
    entry = resolve_model(config.model, config.box_format, config.registry_path)
    source = resolve_release(config.release_dir, config.release_revision, config.release_cache)
    config = replace(config, release_dir=source.path, release_revision=None)
    tasks, forms, templates = _selection(config)
    if config.image_cache is not None:
        try:
            config.image_cache.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise EvalUsageError(f"--image-cache {config.image_cache}: cannot be created ({exc.strerror or exc})") from None
    urls, key_env = _endpoint(config, entry)
    served = config.served_model_name or entry.served_name
    run_config = RunConfig(release_dir=config.release_dir, runs_dir=config.runs_dir, entry=entry, tasks=tasks,
                           forms=forms, templates=templates, limit=config.limit,
                           max_tokens=config.max_tokens or entry.max_tokens, seed=config.seed,
                           concurrency=config.concurrency, batch_size=config.batch_size,
                           image_cache=config.image_cache)
    recipe = BackendRecipe(config.backend, entry, tuple(urls), served, key_env, timeout_s=config.timeout,
                           max_attempts=config.max_attempts, backoff_s=config.retry_backoff,
                           max_response_bytes=config.max_response_bytes,
                           max_consecutive_failures=config.max_consecutive_failures,
                           tensor_parallel_size=config.tensor_parallel_size)
    try:  # this process's backend: the preflight, the run record's description and a one-process run
        backend = recipe.build(config.concurrency)
    except ValueError as exc:  # e.g. credentials in a base URL: said without repeating them
        raise EvalUsageError(str(exc)) from None
    endpoints = _preflight(backend, entry) if config.preflight else []
    generation = {"temperature": run_config.temperature, "max_tokens": run_config.max_tokens, "seed": config.seed}
    selection = {"tasks": list(tasks), "forms": list(forms), "templates": list(templates), "limit": config.limit}
    manifest_args = dict(release_dir=config.release_dir, entry=entry.model_dump(mode="json"), served_model=served,
                         backend=backend.describe() | {"workers": config.workers}, prompt_version=PROMPT_VERSION,
                         generation=generation, selection=selection, argv=_command_line(config),
                         started_at=time.time(), endpoints=[_endpoint_record(check) for check in endpoints],
                         release_source=source.source)
    run_file = run_config.run_dir / RunFile.RUN
    run_config.run_dir.mkdir(parents=True, exist_ok=True)
    progress = Progress(on_change=_with_client_retries(backend, on_progress))
    with contextlib.ExitStack() as stack:
        stack.enter_context(run_lock(run_config.run_dir))  # one writer per run directory
        previous = read_previous(run_file)
        write_json_atomic(run_file, build_manifest(**manifest_args, finished_at=None, previous=previous))
        stopped: CircuitOpen | None = None
        try:
            outcome = _execute(run_config, backend, progress, recipe, config.workers)
            expected = outcome.expected
        except CircuitOpen as exc:
            stopped, expected, outcome = exc, {}, None
        reported = sorted(getattr(getattr(backend, "client", None), "reported_models", ()))
        write_json_atomic(run_file, build_manifest(**manifest_args, finished_at=time.time(), previous=previous,
                                                   reported_models=reported, stopped=str(stopped) if stopped else None))
    if config.image_cache is not None:  # after the run: the listing costs nothing while requests wait
        remove_stale_temporaries(config.image_cache)
    rows = completeness(run_config.predictions, expected)
    if stopped is None:  # a stopped run does not know every expected record: the last complete table stays
        write_json_atomic(run_config.run_dir / RunFile.COMPLETENESS, {"model": entry.name,
                                                                  "prompt_version": PROMPT_VERSION, "configs": rows})
    report = EvalReport(run_dir=run_config.run_dir, predictions=run_config.predictions, completeness=rows,
                        progress=progress, truncated_tail=outcome is not None and outcome.truncated_tail is not None,
                        endpoint_notes=[check.note for check in endpoints if check.note])
    if stopped is not None:
        raise RunStopped(str(stopped), report)
    return report


def _preflight(backend: Backend, entry: ModelEntry) -> list[EndpointCheck]:
    """Every endpoint of an HTTP backend asked what it serves and one tiny question (PreflightError stops here)."""
    client = getattr(backend, "client", None)
    if not isinstance(client, OpenAICompatClient):
        return []  # an in-process engine: nothing to reach

    async def check() -> list[EndpointCheck]:
        try:
            return await preflight(client, max_tokens_field=entry.chat.max_tokens_field,
                                   temperature=entry.chat.temperature)
        finally:
            await client.aclose()

    return asyncio.run(check())


def _endpoint_record(check: EndpointCheck) -> dict:
    return {"base_url": redact_url(check.base_url), "served_models": list(check.served_models or []) or None,
            "reported_model": check.reported_model, "note": check.note}


def _with_client_retries(backend: Backend, on_progress: Callable[[Progress], None] | None
                         ) -> Callable[[Progress], None] | None:
    """One process: the retries are the client's count (worker processes report theirs into the counters)."""
    if on_progress is None:
        return None
    client = getattr(backend, "client", None)

    def changed(progress: Progress) -> None:
        if client is not None:
            progress.retries = max(progress.retries, client.counters["retries"])
        on_progress(progress)

    return changed


def _execute(config: RunConfig, backend: Backend, progress: Progress, recipe: BackendRecipe, workers: int):
    if workers > 1:  # each worker builds its own backend from the recipe; this process's only did the preflight
        return run_sharded(config, recipe, workers, progress)

    async def go():
        try:
            return await Runner(config, backend, progress, take_lock=False).run()
        finally:
            await backend.aclose()

    return asyncio.run(go())
