"""`mmbu eval run --workers N`: the rows split across N processes, one writer.

One Python process tops out at a few thousand requests a second (benchmarks/RESULTS.md, "Eval
runner"), and image preparation (decode, resize, ROI, encode) competes with the HTTP client for its core. With N workers each
process runs the ordinary :class:`~.core.Runner` on every N-th row of each task with its share of
``--concurrency`` and its own HTTP client; the parent keeps the run lock, the one append-only run
file and the progress counts. Workers send finished records as serialised JSON lines; the parent
starts appending only once every worker has read the run file for its resume set, so no worker
ever reads a line while it is being written. A worker that dies ends the run (records already
written stay; re-running resumes); a worker whose parent dies stops within a second.
"""
from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import pickle
import time
from dataclasses import dataclass, field, replace
from multiprocessing.connection import Connection, wait

import orjson

from mmbu.benchmark_eval.backends.openai_compat import OpenAICompatBackend
from mmbu.benchmark_eval.backends.recipe import BackendRecipe
from mmbu.benchmark_eval.records import RecordKey, RecordsError, RecordWriter, repair_truncated_tail
from mmbu.benchmark_eval.release import ReleaseError
from mmbu.benchmark_eval.runner.core import WRITE_INTERVAL_S, Progress, RunConfig, Runner, RunOutcome

PARENT_CHECK_S = 1.0


class WorkerFailed(Exception):
    """A worker process ended without finishing its rows; the message says which and why."""


def split_concurrency(total: int, workers: int) -> list[int]:
    """`total` requests in flight shared as evenly as possible (each worker at least one)."""
    base, extra = divmod(total, workers)
    return [max(1, base + (index < extra)) for index in range(workers)]


# -- worker side ------------------------------------------------------------------------------
class _PipeWriter:
    """The worker's stand-in for RecordWriter: record lines go to the parent, with the counts it shows."""

    def __init__(self, connection: Connection, runner: _WorkerRunner) -> None:
        self.connection, self.runner = connection, runner

    def write_lines(self, payload: bytes) -> None:
        runner = self.runner
        self.connection.send(("records", payload, runner.progress.skipped, runner.backend.client.counters["retries"]))

    def __enter__(self) -> _PipeWriter:
        # The resume set has been read from the run file: the parent may start appending to it.
        self.connection.send(("ready", self.runner.progress.expected))
        return self

    def __exit__(self, *exc: object) -> None:
        pass


class _WorkerRunner(Runner):
    def __init__(self, config: RunConfig, backend: OpenAICompatBackend, connection: Connection) -> None:
        super().__init__(config, backend, take_lock=False)
        self.connection = connection

    def _open_writer(self) -> _PipeWriter:  # type: ignore[override]
        return _PipeWriter(self.connection, self)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists (under another user: a reused pid would not be ours, but it is alive)
        return True
    return True


async def _watch_parent(parent: int) -> None:
    # A parent killed outright cannot tell its workers; they would go on asking until the pipe broke. A worker's own
    # parent is the fork server, which exits when the eval process dies: either change means the run is over.
    forked_by = os.getppid()
    while os.getppid() == forked_by and _alive(parent):
        await asyncio.sleep(PARENT_CHECK_S)
    os._exit(3)


async def _work(config: RunConfig, recipe: BackendRecipe, concurrency: int, connection: Connection,
                parent: int) -> RunOutcome:
    backend = recipe.build(concurrency)
    watchdog = asyncio.create_task(_watch_parent(parent))
    try:
        return await _WorkerRunner(replace(config, concurrency=concurrency), backend, connection).run()
    finally:
        watchdog.cancel()
        await backend.aclose()


def _worker_main(config: RunConfig, recipe: BackendRecipe, concurrency: int, connection: Connection,
                 parent: int) -> None:
    try:
        outcome = asyncio.run(_work(config, recipe, concurrency, connection, parent))
    except BaseException as exc:  # noqa: BLE001 - reported to the parent, which decides
        with contextlib.suppress(Exception):
            connection.send(("failed", _portable(exc)))
        raise SystemExit(1) from None
    connection.send(("done", outcome.expected, outcome.progress.skipped,
                     (outcome.progress.images_reused, outcome.progress.images_stored)))
    connection.close()


def _portable(exc: BaseException) -> BaseException:
    """`exc` as the parent can unpickle it: itself, else the nearest release/records error class the
    CLI reports as bad input, else a WorkerFailed carrying its text."""
    message = f"{exc}"
    for candidate in (exc, *(kind(message) for kind in (ReleaseError, RecordsError) if isinstance(exc, kind))):
        try:
            pickle.loads(pickle.dumps(candidate))
            return candidate
        except Exception:  # noqa: BLE001 - e.g. an __init__ with extra required arguments
            continue
    return WorkerFailed(f"{type(exc).__name__}: {message}")


# -- parent side ------------------------------------------------------------------------------
@dataclass
class _Worker:
    index: int
    process: multiprocessing.process.BaseProcess
    connection: Connection
    skipped: int = 0
    retries: int = 0
    ready: bool = False
    finished: bool = False


def run_sharded(config: RunConfig, recipe: BackendRecipe, workers: int,
                progress: Progress | None = None) -> RunOutcome:
    """Run `config` on `workers` processes; the caller holds the run lock. Returns the merged outcome."""
    progress = progress or Progress()
    config.run_dir.mkdir(parents=True, exist_ok=True)
    truncated = repair_truncated_tail(config.predictions)
    # fork would copy threads and event loops; spawn made every worker import the runner, pandas and the backends
    # again (~1 CPU-s each): a fork server, started once per eval process with this module preloaded, forks each
    # worker from a single-threaded process that has imported them already
    if "forkserver" in multiprocessing.get_all_start_methods():
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload([__name__])
    else:  # Windows has no fork server
        context = multiprocessing.get_context("spawn")
    team: list[_Worker] = []
    for index, concurrency in enumerate(split_concurrency(config.concurrency, workers)):
        receive, send = context.Pipe(duplex=False)
        process = context.Process(target=_worker_main, name=f"mmbu-eval-worker-{index}", daemon=True,
                                  args=(replace(config, shard=(index, workers)), recipe, concurrency, send,
                                        os.getpid()))
        process.start()
        send.close()  # the parent keeps only the reading end, so a dead worker reads as EOF
        team.append(_Worker(index, process, receive))
    expected: dict[RecordKey, str] = {}
    state = _Collected()
    try:
        with RecordWriter(config.predictions) as writer:
            try:
                _collect(team, state, progress, expected, writer)
            finally:
                if state.failure is not None or not all(w.finished for w in team):  # a failure or an interrupt
                    _stop(team)  # first: a worker still reading the run file must not see it grow
                _append_held(writer, state)  # answers that arrived and are not appended yet are kept
    finally:
        if not all(w.finished for w in team):  # the writer itself failed
            _stop(team)
        for worker in team:
            worker.process.join(timeout=30)
            worker.connection.close()
    if state.failure is not None:
        raise state.failure
    if progress.on_change:
        progress.on_change(progress)
    return RunOutcome(expected, progress, truncated)


@dataclass
class _Collected:
    held: list[bytes] = field(default_factory=list)   # serialised records not yet appended
    failure: BaseException | None = None


def _collect(team: list[_Worker], state: _Collected, progress: Progress, expected: dict[RecordKey, str],
             writer: RecordWriter) -> None:
    """Receive from the workers until all are done or one fails; append held records every
    WRITE_INTERVAL_S once every worker has read its resume set."""
    last_write = -float("inf")
    while state.failure is None and any(not w.finished for w in team):
        live = {w.connection: w for w in team if not w.finished}
        for connection in wait(list(live), timeout=WRITE_INTERVAL_S):
            worker = live[connection]
            try:
                message = connection.recv()
            except (EOFError, OSError):
                worker.finished = True
                state.failure = state.failure or WorkerFailed(
                    f"eval worker {worker.index} stopped without finishing (exit code "
                    f"{_exit_code(worker.process)}); re-run the same command to resume")
                continue
            state.failure = _handle(message, worker, progress, state.held, expected) or state.failure
        all_ready = all(w.ready or w.finished for w in team)
        if state.failure is None and all_ready and state.held and time.monotonic() - last_write >= WRITE_INTERVAL_S:
            _append_held(writer, state)
            last_write = time.monotonic()


def _append_held(writer: RecordWriter, state: _Collected) -> None:
    """Append the held records, taken out of `state.held` before the append starts.

    Ctrl-C raises KeyboardInterrupt wherever the parent is, most often just after the fsync (its longest step). A group
    still held then was appended a second time by the stop in :func:`run_sharded`: two ok records for each of its keys.
    Taken out first, it is appended at most once; a Ctrl-C between the taking and the append (a few bytecodes) costs
    that group, which the resume asks again.
    """
    payload = b"".join(state.held)
    state.held.clear()
    writer.write_lines(payload)


def _handle(message: tuple, worker: _Worker, progress: Progress, held: list[bytes],
            expected: dict[RecordKey, str]) -> BaseException | None:
    kind = message[0]
    if kind == "ready":
        worker.ready = True
        progress.expected += message[1]
    elif kind == "records":
        _, lines, skipped, retries = message
        held.append(lines)
        progress.skipped += skipped - worker.skipped
        progress.retries += retries - worker.retries
        worker.skipped, worker.retries = skipped, retries
        for line in lines.splitlines():
            record = orjson.loads(line)
            progress.count(record["status"], record.get("error_reason"), record.get("usage"))
    elif kind == "done":
        _, shard_expected, skipped, (reused, stored) = message
        expected.update(shard_expected)
        progress.images_reused += reused
        progress.images_stored += stored
        progress.skipped += skipped - worker.skipped
        worker.skipped, worker.finished = skipped, True
    elif kind == "failed":
        worker.finished = True
        return message[1]
    return None


def _stop(team: list[_Worker]) -> None:
    for worker in team:
        if worker.process.is_alive():
            worker.process.terminate()


def _exit_code(process: multiprocessing.process.BaseProcess) -> int | None:
    process.join(timeout=5)
    return process.exitcode
