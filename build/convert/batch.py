"""Convert many sources to PNG: walk inputs, convert each in worker processes, report one JSON line each.

The report follows docs/architecture.md §3.2. One bad file never stops the batch: its line says `status: "error"`
with one readable sentence. A worker process that dies (a decoder crash) is replaced and the file that
killed it is reported as an error. The report is streamed into a temporary file beside the target and
moved into place when the batch ends, so a reader never sees a half-written report.
"""
from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, is_dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mmbu.build.convert.base import ConversionError, ConvertOptions, non_utf8_name_error
from mmbu.core.text import printable_path
from mmbu.core.budget import OverBudget
from mmbu.build.convert.dispatch import read_identified
from mmbu.build.convert.sniff import dicom_slides_in_directory, identify, is_slide_companion, mrxs_in_directory
from mmbu.build.convert.writer import plan_output_names, write_png
from mmbu.core.files import atomic_file

REPORT_NAME = "convert-report.jsonl"
# Companion files that belong to another source in the same folder: (suffix, owner's suffix)
COMPANIONS = (
    (".img", ".hdr"), (".img.gz", ".hdr.gz"),  # Analyze / NIfTI pairs
    (".raw", ".mhd"), (".zraw", ".mhd"),  # MetaImage detached data
    (".raw", ".nhdr"), (".raw.gz", ".nhdr"),  # NRRD detached data
)


def walk_sources(sources: Iterable[str | Path], skip: Iterable[Path] = ()) -> list[Path]:
    """Expand the user's sources into the list of things to convert, in a stable order.

    A file is one source. A directory that is itself one multi-file slide (exactly one `.mrxs` with
    its data folder and nothing else, or only the instances of one DICOM whole-slide series) is one
    source, named after the directory; any other directory is walked. Left out: the data folder of an
    MRXS slide, all but one instance of each DICOM whole-slide series in a folder (openslide finds the
    others from that one), the `.img` half of an Analyze/NIfTI pair, hidden files and `skip` (the
    output folder and report).
    """
    skipped = {Path(p).resolve() for p in skip}
    found: list[Path] = []
    for source in sources:
        path = Path(source)
        if path.is_dir() and not _is_mrxs_slide_directory(path):
            found.extend(_directory_sources(path, skipped))
        elif path.resolve() not in skipped:
            found.append(path)
    unique: dict[Path, Path] = {}
    for path in found:
        unique.setdefault(path.resolve(), path)
    return list(unique.values())


def _is_mrxs_slide_directory(directory: Path) -> bool:
    slide = mrxs_in_directory(directory)
    if slide is None:
        return False
    visible = {p.name for p in directory.iterdir() if not p.name.startswith(".")}
    return visible <= {slide.name, slide.stem}


def _directory_sources(directory: Path, skipped: set[Path]) -> Iterator[Path]:
    """The sources in a directory: the directory itself when it holds only the instances of one DICOM
    whole-slide series (named after the folder, like an MRXS slide folder), else its walked contents."""
    entries = [
        entry for entry in sorted(directory.iterdir(), key=lambda p: p.name)
        if not entry.name.startswith(".") and entry.resolve() not in skipped
    ]
    slides = dicom_slides_in_directory(directory)
    if len(slides) == 1 and entries and len(slides[0].instances) == len(entries):
        yield directory
        return
    companions = {path for slide in slides for path in slide.instances if path != slide.representative}
    for entry in entries:
        if entry in companions:
            continue
        if entry.is_dir():
            if not is_slide_companion(entry):
                yield from _directory_sources(entry, skipped)
        elif not _is_companion_file(entry):
            yield entry


def _is_companion_file(path: Path) -> bool:
    name = path.name.lower()
    for suffix, owner_suffix in COMPANIONS:
        if name.endswith(suffix):
            owner = path.with_name(path.name[: -len(suffix)] + owner_suffix)
            if owner.exists():
                return True
    return False


@dataclass(frozen=True)
class ConvertedPng:
    """One conversion's report record and, when it succeeded, what is still in memory after writing the PNG."""

    record: dict[str, Any]
    data: bytes | None = None  # the PNG file's bytes as written
    pixels: np.ndarray | None = None  # the (H, W) or (H, W, 3) uint8 pixels encoded in it


def convert_one(source: Path, output: Path, options: ConvertOptions, *, durable: bool = True,
                atomic: bool = True) -> dict[str, Any]:
    """Convert one source into `output` (a PNG path) and return its report record; never raises.
    `durable=False`: the PNG is not fsynced (the build syncs once per step; see mmbu.core.files);
    `atomic=False`: written in place (`write_png`)."""
    return convert_keeping_png(source, output, options, durable=durable, atomic=atomic).record


def convert_keeping_png(source: Path, output: Path, options: ConvertOptions, *, durable: bool = True,
                        atomic: bool = True) -> ConvertedPng:
    """`convert_one`, also returning the PNG's bytes and pixels: the build takes the PNG's size, CRC and
    perceptual hashes from them instead of reading the file back."""
    record: dict[str, Any] = {
        "source": printable_path(source), "output": None, "status": "error", "error": None, "format": None,
        "width": None, "height": None, "mode": None, "frame": None, "params": {},
    }
    if problem := non_utf8_name_error(source):
        record["error"] = problem
        return ConvertedPng(record)
    try:
        identified = identify(source)
        record["format"] = identified.format
        converted = read_identified(identified, options)
        data = write_png(converted.pixels, output, durable=durable, atomic=atomic, encoded=converted.png)
    except (ConversionError, OverBudget) as error:  # OverBudget: the declared size, refused before reading
        record["error"] = str(error)
        return ConvertedPng(record)
    except MemoryError:
        record["error"] = f"{source} needs more memory than is available to convert"
        return ConvertedPng(record)
    except Exception as error:  # a reader bug must cost one file, not the batch
        record["error"] = f"unexpected {type(error).__name__} while converting {source}: {error}"
        return ConvertedPng(record)
    record.update(
        output=str(output), status="ok", width=converted.width, height=converted.height,
        mode=converted.mode, frame=converted.frame,
        params=_jsonable(converted.params) | {"geometry": converted.geometry.to_json()},
    )
    if options.as_mask:
        record["params"].setdefault("as_mask", True)
    return ConvertedPng(record, data, converted.pixels)


def convert_paths(
    sources: Iterable[str | Path],
    out_dir: str | Path,
    options: ConvertOptions | None = None,
    report_path: str | Path | None = None,
    jobs: int = 1,
    show_progress: bool = False,
) -> list[dict[str, Any]]:
    """Convert every source under `sources` into PNGs in `out_dir`; returns the report records in source order.

    The report (default `out_dir/convert-report.jsonl`) is replaced atomically when the batch ends.
    `jobs` > 1 converts in that many worker processes.
    """
    options = options or ConvertOptions()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    report_path = Path(report_path) if report_path else out_dir / REPORT_NAME
    paths = walk_sources(sources, skip=(out_dir, report_path))
    outputs = [out_dir / name for name in plan_output_names(paths, reserved=_names_in(out_dir, paths))]
    tasks = list(zip(paths, outputs))
    records: dict[Path, dict[str, Any]] = {}

    with _ReportWriter(report_path) as report, _ProgressBar(len(tasks), show_progress) as advance:
        def accept(record: dict[str, Any], source: Path) -> None:
            records[source] = record
            report.write(record)
            advance()

        if jobs <= 1 or len(tasks) <= 1:
            for source, output in tasks:
                accept(convert_one(source, output, options), source)
        else:
            _convert_in_pool(tasks, options, jobs, accept)
    return [records[source] for source, _ in tasks]


def _names_in(directory: Path, paths: list[Path]) -> set[str]:
    """Names of the sources that live in `directory`: an output there must never replace one of them
    (a DICOM called `x.png`, or a 16-bit PNG, converted into its own folder)."""
    folder = directory.resolve()
    resolved = (path.resolve() for path in paths)
    return {path.name for path in resolved if path.parent == folder}


def _convert_in_pool(
    tasks: list[tuple[Path, Path]], options: ConvertOptions, jobs: int,
    accept: Callable[[dict[str, Any], Path], None],
) -> None:
    # imported here: a one-file conversion (one slide) should not pay for the process-pool machinery
    from concurrent.futures import ProcessPoolExecutor, as_completed
    from concurrent.futures.process import BrokenProcessPool

    crashed: list[tuple[Path, Path]] = []
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        futures = {pool.submit(convert_one, source, output, options): (source, output) for source, output in tasks}
        for future in as_completed(futures):
            source, output = futures[future]
            try:
                accept(future.result(), source)
            except BrokenProcessPool:
                crashed.append((source, output))
    # A dead worker breaks every pending future; retry those alone to find the file that kills it.
    for source, output in crashed:
        try:
            with ProcessPoolExecutor(max_workers=1) as pool:
                accept(pool.submit(convert_one, source, output, options).result(), source)
        except BrokenProcessPool:
            Path(output).unlink(missing_ok=True)
            accept(_crash_record(source), source)


def _crash_record(source: Path) -> dict[str, Any]:
    return {
        "source": printable_path(source), "output": None, "status": "error",
        "error": f"the converter process crashed while reading {printable_path(source)} (a decoder failed on this file)",
        "format": None, "width": None, "height": None, "mode": None, "frame": None, "params": {},
    }


class _ReportWriter:
    """Streams JSON lines into a temporary file next to the report; moves it into place on close."""

    def __init__(self, target: Path) -> None:
        self.file = atomic_file(target, "w", encoding="utf-8")

    def __enter__(self) -> _ReportWriter:
        self.stream = self.file.__enter__()
        return self

    def write(self, record: dict[str, Any]) -> None:
        self.stream.write(json.dumps(record, ensure_ascii=False) + "\n")
        self.stream.flush()

    def __exit__(self, *exc_info: Any) -> None:
        self.file.__exit__(None, None, None)  # the records written so far are complete lines: keep them


class _ProgressBar:
    """A rich progress bar on stderr (or nothing), exposing one `advance()` callable.

    rich is imported only when the bar is shown: a script or a one-slide conversion skips its import.
    """

    def __init__(self, total: int, enabled: bool) -> None:
        self.total = total
        self.enabled = enabled

    def __enter__(self) -> Callable[[], None]:
        if not self.enabled:
            return lambda: None
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        self.progress = Progress(
            TextColumn("converting"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
            console=Console(stderr=True),
        )
        self.progress.start()
        task = self.progress.add_task("convert", total=self.total)
        return lambda: self.progress.advance(task)

    def __exit__(self, *exc_info: object) -> None:
        if self.enabled:
            self.progress.stop()


def _jsonable(value: Any) -> Any:
    """Report params as plain JSON: numpy scalars/arrays, paths, tuples and dataclasses converted."""
    if isinstance(value, dict):
        return {str(key): _jsonable(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(item) for item in value]
    if isinstance(value, np.generic):
        return _jsonable(value.item())
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, Path):
        return str(value)
    if is_dataclass(value) and not isinstance(value, type):
        return _jsonable(asdict(value))
    if isinstance(value, float) and not np.isfinite(value):
        return None
    return value
