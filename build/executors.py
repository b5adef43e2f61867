"""Run one function over many datasets on local processes or a Dask cluster: the same code path.

The function must be importable (a module-level function) and take picklable arguments; results
come back as they finish, with their submission index. A dataset that raises is returned as the
exception object so the caller can report it and go on with the others.

Items may be a lazy iterable: each one is submitted as soon as it is produced, so the producer
(the pipeline's fetch loop) overlaps with the workers instead of running before them.
"""
from __future__ import annotations

import gc
import multiprocessing
import os
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Literal

ExecutorName = Literal["local", "dask"]
# (function, jobs) -> the results in job order: how a stage lets the build run its jobs on the build's workers
RunJobs = Callable[[Callable[[Any], Any], list[Any]], Iterable[Any]]


def in_this_process(function: Callable[[Any], Any], jobs: list[Any]) -> Iterator[Any]:
    """A `RunJobs` that runs the jobs one after the other in this process (the default outside a build)."""
    return map(function, jobs)


class ExecutorError(RuntimeError):
    """The executor itself cannot start (e.g. no Dask scheduler at the given address)."""


def run_all(
    function: Callable[..., Any],
    items: Iterable[Any],
    *,
    executor: ExecutorName = "local",
    jobs: int = 1,
    scheduler: str | None = None,
) -> Iterator[tuple[int, Any]]:
    """Yield (index, result-or-exception) as each item finishes; `items` is consumed lazily."""
    if executor == "dask":
        yield from _run_dask(function, items, scheduler)
    elif jobs <= 1:
        for index, item in enumerate(items):
            yield index, _call(function, item)
    else:
        yield from _run_local(function, items, jobs)


class WorkerDied(RuntimeError):
    """The worker process running one item died (killed by the system, e.g. out of memory, or a crash)."""


def _run_local(function: Callable[..., Any], items: Iterable[Any], jobs: int) -> Iterator[tuple[int, Any]]:
    """Submit each item as it arrives, report what finished meanwhile, then wait for the rest.

    A worker that dies breaks the whole process pool and every item in flight with it: those items are
    run again one at a time in a pool of their own, so only the item that kills its worker again fails
    (as WorkerDied), and a fresh pool takes the items still to come.
    """
    gc.freeze()  # see _start_worker; undone once the pool is shut down, so a long-lived caller's garbage is collected
    pool = _new_pool(jobs)
    pending: dict[Future, tuple[int, Any]] = {}
    orphaned: list[tuple[int, Any]] = []  # items whose pool broke under them

    def finished(futures: Iterable[Future]) -> Iterator[tuple[int, Any]]:
        for future in futures:
            index, item = pending.pop(future)
            try:
                yield index, future.result()
            except BrokenProcessPool:
                orphaned.append((index, item))

    try:
        for index, item in enumerate(items):
            try:
                future = pool.submit(_call, function, item)
            except BrokenProcessPool:
                pool.shutdown(wait=False, cancel_futures=True)
                pool = _new_pool(jobs)
                future = pool.submit(_call, function, item)
            pending[future] = (index, item)
            yield from finished([f for f in pending if f.done()])
        yield from finished(list(as_completed(pending)))
    except KeyboardInterrupt:  # Ctrl-C, or SIGTERM (mmbu.core.interrupt): the workers stop now, not after their dataset
        for worker in multiprocessing.active_children():
            worker.terminate()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        gc.unfreeze()
    for index, item in sorted(orphaned, key=lambda pair: pair[0]):
        with _new_pool(1) as alone:
            try:
                yield index, alone.submit(_call, function, item).result()
            except BrokenProcessPool:
                yield index, WorkerDied("the worker process building it died (killed by the system, e.g. out of "
                                        "memory, or a crash in a decoder), also when run again alone")


# A worker's cyclic garbage collector took 10 % of its CPU on the paper-scale benchmark's datasets (8 s of 75 s over
# three of them, timed by gc.callbacks): every full collection walked the modules, taxonomy and plans it inherited,
# and gen-0 collections ran every 700 new containers (models, rows, pandas internals). With the inherited objects
# frozen 5.5-6 s; with the thresholds below too, 1.7 s in 248 collections instead of 4,025.
WORKER_GC_THRESHOLDS = (10_000, 20, 20)


def _new_pool(jobs: int) -> ProcessPoolExecutor:
    return ProcessPoolExecutor(max_workers=jobs, initializer=_start_worker, initargs=(os.getpid(),))


def _start_worker(parent: int) -> None:
    """Pool initializer: what a worker inherited stays out of its garbage collections (frozen in the parent before
    it forked and again here: nothing of it is garbage, and a collection would also write to its shared pages), and
    collections run less often; then watch the parent."""
    gc.freeze()
    gc.set_threshold(*WORKER_GC_THRESHOLDS)
    exit_when_parent_dies(parent)


def exit_when_parent_dies(parent: int, poll_seconds: float = 0.5) -> None:
    """Start a daemon thread that ends this worker when `parent` is gone.

    A parent killed outright (kill -9) cannot tell its pool; its workers would go on converting a whole
    dataset into a folder nobody reads. Run as a pool initializer, so it watches each worker process.
    """
    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(poll_seconds)
        os._exit(3)

    threading.Thread(target=watch, name="parent-watchdog", daemon=True).start()


def _call(function: Callable[..., Any], item: Any) -> Any:
    try:
        return function(item)
    except Exception as exc:  # noqa: BLE001 - one dataset's failure must not stop the others
        return exc


DASK_CONNECT_TIMEOUT_S = 10.0  # to open the connection, and again for the scheduler's first message
DASK_CONNECT_TIMEOUT_ENV = "MMBU_DASK_CONNECT_TIMEOUT"  # seconds, for a scheduler slower to answer than that
_FRAME_COUNT = struct.Struct("<Q")  # a Dask TCP message opens with its number of frames, a little-endian uint64
_MAX_HANDSHAKE_FRAMES = 64


def dask_connect_timeout() -> float:
    """Seconds to wait for the Dask scheduler: `MMBU_DASK_CONNECT_TIMEOUT`, else DASK_CONNECT_TIMEOUT_S."""
    text = os.environ.get(DASK_CONNECT_TIMEOUT_ENV, "").strip()
    if not text:
        return DASK_CONNECT_TIMEOUT_S
    try:
        seconds = float(text)
    except ValueError:
        seconds = float("nan")
    if not 0 < seconds < float("inf"):
        raise ExecutorError(f"{DASK_CONNECT_TIMEOUT_ENV}={text!r}: expected a number of seconds above 0, e.g. 30")
    return seconds


def probe_dask_scheduler(scheduler: str, timeout: float = DASK_CONNECT_TIMEOUT_S) -> None:
    """ExecutorError unless `scheduler` (`tcp://host:port` or `host:port`) accepts a connection and opens with a Dask
    message within `timeout` seconds each.

    A Dask scheduler sends its handshake as soon as it accepts a connection. distributed's own `Client` waits for
    it without a bound when the port accepts and stays silent (the build hung), and reads another protocol's bytes
    as a frame length (an HTTP port gave a MemoryError traceback): both are one sentence here. Other schemes (tls,
    inproc, ucx) are left to `Client`."""
    scheme, _, rest = scheduler.rpartition("://")
    if scheme not in ("", "tcp"):
        return
    host, _, port = rest.rpartition(":")
    if not host or not port.isdigit():
        raise ExecutorError(f"--scheduler {scheduler}: expected tcp://HOST:PORT, e.g. tcp://127.0.0.1:8786")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout) as connection:
            first = _receive_exactly(connection, _FRAME_COUNT.size)
    except TimeoutError:
        raise ExecutorError(f"the Dask scheduler at {scheduler} did not answer within {timeout:g} s (the port accepts "
                            "connections but sends no Dask handshake: is it the scheduler's port, usually 8786?)") from None
    except OSError as exc:
        raise ExecutorError(f"cannot reach the Dask scheduler at {scheduler} ({exc.strerror or exc})") from None
    frames = _FRAME_COUNT.unpack(first)[0] if len(first) == _FRAME_COUNT.size else 0
    if not 0 < frames <= _MAX_HANDSHAKE_FRAMES:
        shown = first.decode("latin-1").encode("unicode_escape").decode()
        raise ExecutorError(f"{scheduler} does not speak Dask's protocol (it opened with {shown!r}); give the "
                            "scheduler's address, e.g. tcp://127.0.0.1:8786, not its dashboard's")


def _receive_exactly(connection: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        piece = connection.recv(size - len(data))
        if not piece:
            break
        data += piece
    return data


def _run_dask(function: Callable[..., Any], items: Iterable[Any], scheduler: str | None) -> Iterator[tuple[int, Any]]:
    try:
        from distributed import Client, as_completed as dask_completed
    except ImportError:
        raise ExecutorError("the Dask executor needs the 'dask' extra: pip install 'mmbu[dask]'") from None
    if not scheduler:
        raise ExecutorError("--executor dask needs --scheduler ADDRESS (e.g. tcp://127.0.0.1:8786)")
    timeout = dask_connect_timeout()
    probe_dask_scheduler(scheduler, timeout)
    try:
        client = Client(scheduler, timeout=f"{timeout:g}s")
    except (OSError, TimeoutError, MemoryError, ValueError) as exc:  # MemoryError: a length field of another protocol
        raise ExecutorError(f"cannot reach the Dask scheduler at {scheduler} ({type(exc).__name__}: "
                            f"{str(exc)[:200]})") from None
    try:
        pending: dict[str, int] = {}
        futures = dask_completed()
        for index, item in enumerate(items):
            future = client.submit(_call, function, item, pure=False)
            pending[future.key] = index
            futures.add(future)
            for finished in futures.next_batch(block=False):
                yield pending.pop(finished.key), finished.result()
        for future in futures:
            yield pending.pop(future.key), future.result()
    finally:
        client.close()
