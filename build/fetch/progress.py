"""Progress of `mmbu fetch`: on a terminal one rich bar for the datasets and one for the file being downloaded;
elsewhere (a log file, CI) a plain line every few seconds (`mmbu.core.progress`)."""
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
from rich.filesize import decimal
from rich.text import Text

from mmbu.core.progress import PlainProgress


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


class PlainFetchProgress:
    """The same ByteProgress for output that is not a terminal: datasets done, the file being downloaded, its
    bytes, speed and time left, as one plain line every few seconds; messages printed whole."""

    def __init__(self, total_datasets: int, console: Console | None = None) -> None:
        self._console = console or Console(stderr=True)
        self._datasets = PlainProgress("fetch", unit="datasets/s", stream=self._console.file)
        self._total, self._done = total_datasets, 0
        self._file: tuple[str, int | None] | None = None
        self._bytes, self._file_started = 0, 0.0

    def __enter__(self) -> PlainFetchProgress:
        self._line(force=True)
        return self

    def __exit__(self, *exc: object) -> None:
        self._datasets.close()

    def dataset_done(self) -> None:
        self._done += 1
        self._line(force=True)

    def start(self, name: str, total: int | None, done: int) -> None:
        self._file, self._bytes = (name, total), done
        self._file_started = self._datasets.clock()
        self._line()

    def advance(self, n: int) -> None:
        self._bytes += n
        self._line()

    def finish(self) -> None:
        self._file = None

    def print(self, message: str) -> None:
        self._console.print(message, markup=False, highlight=False, soft_wrap=True)

    def _line(self, force: bool = False) -> None:
        note = None
        if self._file is not None:
            name, total = self._file
            elapsed = max(self._datasets.clock() - self._file_started, 1e-6)
            speed = self._bytes / elapsed
            left = f", ETA {int((total - self._bytes) / speed)} s" if total and speed > 0 else ""
            size = f"{decimal(self._bytes)}/{decimal(total)}" if total else decimal(self._bytes)
            note = f"downloading {name}: {size} at {decimal(int(speed))}/s{left}"
        self._datasets.update(self._done, self._total, note=note, force=force)
