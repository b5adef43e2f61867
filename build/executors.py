"""Run one function over many datasets on local processes or a Dask cluster: the same code path.

The function must be importable (a module-level function) and take picklable arguments; results
come back in submission order. A dataset that raises is returned as the exception object so the
caller can report it and go on with the others.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Any, Literal

ExecutorName = Literal["local", "dask"]


class ExecutorError(RuntimeError):
    """The executor itself cannot start (e.g. no Dask scheduler at the given address)."""


def run_all(
    function: Callable[..., Any],
    items: Sequence[Any],
    *,
    executor: ExecutorName = "local",
    jobs: int = 1,
    scheduler: str | None = None,
) -> Iterator[tuple[int, Any]]:
    """Yield (index, result-or-exception) as each item finishes."""
    if executor == "dask":
        yield from _run_dask(function, items, scheduler)
    elif jobs <= 1 or len(items) <= 1:
        for index, item in enumerate(items):
            yield index, _call(function, item)
    else:
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            futures = {pool.submit(_call, function, item): index for index, item in enumerate(items)}
            for future in as_completed(futures):
                yield futures[future], future.result()


def _call(function: Callable[..., Any], item: Any) -> Any:
    try:
        return function(item)
    except Exception as exc:  # noqa: BLE001 - one dataset's failure must not stop the others
        return exc


def _run_dask(function: Callable[..., Any], items: Sequence[Any], scheduler: str | None) -> Iterator[tuple[int, Any]]:
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
        futures = client.map(_call, [function] * len(items), list(items), pure=False)
        order = {future.key: index for index, future in enumerate(futures)}
        for future in dask_completed(futures):
            yield order[future.key], future.result()
    finally:
        client.close()
