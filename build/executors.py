"""Run one function over many datasets on local processes or a Dask cluster: the same code path.

The function must be importable (a module-level function) and take picklable arguments; results
come back as they finish, with their submission index. A dataset that raises is returned as the
exception object so the caller can report it and go on with the others.

Items may be a lazy iterable: each one is submitted as soon as it is produced, so the producer
(the pipeline's fetch loop) overlaps with the workers instead of running before them.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from typing import Any, Literal

ExecutorName = Literal["local", "dask"]


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
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            yield from _submit_as_produced(lambda item: pool.submit(_call, function, item), items)


def _submit_as_produced(submit: Callable[[Any], Future], items: Iterable[Any]) -> Iterator[tuple[int, Any]]:
    """Submit each item as it arrives, report what finished meanwhile, then wait for the rest."""
    pending: dict[Any, int] = {}
    for index, item in enumerate(items):
        pending[submit(item)] = index
        for future in [f for f in pending if f.done()]:
            yield pending.pop(future), future.result()
    for future in as_completed(pending):
        yield pending[future], future.result()


def _call(function: Callable[..., Any], item: Any) -> Any:
    try:
        return function(item)
    except Exception as exc:  # noqa: BLE001 - one dataset's failure must not stop the others
        return exc


def _run_dask(function: Callable[..., Any], items: Iterable[Any], scheduler: str | None) -> Iterator[tuple[int, Any]]:
    try:
        from distributed import Client, as_completed as dask_completed
    except ImportError:
        raise ExecutorError("the Dask executor needs the 'dask' extra: pip install 'mmbu[dask]'") from None
    if not scheduler:
        raise ExecutorError("--executor dask needs --scheduler ADDRESS (e.g. tcp://127.0.0.1:8786)")
    try:
        client = Client(scheduler, timeout="10s")
    except (OSError, TimeoutError) as exc:
        raise ExecutorError(f"cannot reach the Dask scheduler at {scheduler} ({exc})") from None
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
