"""A rich progress display for `mmbu fetch`: one bar for the datasets, one for the file being downloaded."""
from __future__ import annotations

from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TaskID,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)
from rich.text import Text


class _FilesOnly(ProgressColumn):
    """Show a byte column (speed, time left) on download bars only."""

    def __init__(self, column: ProgressColumn) -> None:
        super().__init__()
        self._column = column

    def render(self, task: Task) -> Text:
        return Text("") if task.fields.get("datasets") else self._column.render(task)


class _AmountColumn(ProgressColumn):
    """"3/10" on the datasets bar, "1.2/4.0 MB" on a download bar."""

    def __init__(self) -> None:
        super().__init__()
        self._count, self._bytes = MofNCompleteColumn(), DownloadColumn()

    def render(self, task: Task) -> Text:
        return (self._count if task.fields.get("datasets") else self._bytes).render(task)


class RichFetchProgress:
    """Implements the downloader's ByteProgress; use as a context manager around the whole fetch."""

    def __init__(self, total_datasets: int, console: Console | None = None) -> None:
        self._progress = Progress(
            TextColumn("{task.description}"), BarColumn(), _AmountColumn(),
            _FilesOnly(TransferSpeedColumn()), _FilesOnly(TimeRemainingColumn()), console=console, transient=False,
        )
        self._datasets = self._progress.add_task("datasets", total=total_datasets, datasets=True)
        self._file: TaskID | None = None

    def __enter__(self) -> RichFetchProgress:
        self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._progress.stop()

    def dataset_done(self) -> None:
        self._progress.advance(self._datasets)

    def start(self, name: str, total: int | None, done: int) -> None:
        if self._file is not None:
            self._progress.remove_task(self._file)
        self._file = self._progress.add_task(f"  {name}", total=total, completed=done)

    def advance(self, n: int) -> None:
        if self._file is not None:
            self._progress.advance(self._file, n)

    def finish(self) -> None:
        if self._file is not None:
            self._progress.remove_task(self._file)
            self._file = None

    def print(self, message: str) -> None:
        self._progress.console.print(message, markup=False, highlight=False, soft_wrap=True)
