"""A build step's records as JSON lines: written one at a time as they are made, read back one at a time.

A dataset worker's `samples.jsonl` and `converted.jsonl` hold a record per sample; written and read whole (one JSON
list) they held every sample in memory, 4-13 KB each. Here each record is one line, the file is written through a
temporary that is renamed when the step ends (`atomic_file`), and its last line is a trailer with the record count,
so a file torn by anything after its rename (a truncated copy, a full disk) is seen as incomplete before a step
trusts it (`is_complete`) and when it is read (`read_lines`), rather than read as a shorter dataset.
"""
from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from itertools import islice
from pathlib import Path
from types import TracebackType
from typing import IO, Any, TypeVar

import orjson

from mmbu.core.files import atomic_file

TRAILER_KEY = "end_of_records"  # never a record's top-level key
_TAIL_BYTES = 256  # the trailer is `{"end_of_records": N}`, well under this
T = TypeVar("T")


class TornFile(ValueError):
    """A lines file without its trailer, or with fewer records than its trailer counts."""


class LinesWriter:
    """`with LinesWriter(path) as out: out.write(json_text)`: one record per line, the trailer at the end, the file
    in place only when the block ends without an exception."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.count = 0
        self._file = atomic_file(self.path, "w", encoding="utf-8")
        self._stream: IO[str] | None = None

    def __enter__(self) -> LinesWriter:
        self._stream = self._file.__enter__()
        return self

    def write(self, record: str) -> None:
        """Add one record, given as its JSON text on one line (`json.dumps`, `model_dump_json`)."""
        self._stream.write(record)
        self._stream.write("\n")
        self.count += 1

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        if exc_type is None:
            self._stream.write(json.dumps({TRAILER_KEY: self.count}) + "\n")
        self._file.__exit__(exc_type, exc, traceback)


def parse_record(line: str) -> Any:
    """One record line's value: orjson (a third of json's time on the rows step's lines), or json for what only json
    reads (NaN and Infinity, which `json.dumps` writes)."""
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError:
        return json.loads(line)


def _trailer_count(line: bytes | str) -> int | None:
    try:
        value = json.loads(line)
    except ValueError:
        return None
    if isinstance(value, dict) and list(value) == [TRAILER_KEY] and isinstance(value[TRAILER_KEY], int):
        return value[TRAILER_KEY]
    return None


def is_complete(path: Path) -> bool:
    """The file exists and ends with its trailer (read from its last bytes only: cheap on a no-op rebuild)."""
    try:
        with open(path, "rb") as handle:
            handle.seek(max(0, os.fstat(handle.fileno()).st_size - _TAIL_BYTES))
            tail = handle.read()
    except OSError:
        return False
    lines = tail.split(b"\n")
    return len(lines) >= 2 and lines[-1] == b"" and _trailer_count(lines[-2]) is not None


def read_lines(path: Path) -> Iterator[str]:
    """Each record's JSON text in the order written; raises TornFile (naming the file) at the end of a file whose
    trailer is missing or counts other than the records read."""
    count = 0
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            if line.startswith('{"' + TRAILER_KEY):
                expected = _trailer_count(line)
                if expected == count and not handle.readline():
                    return
                raise TornFile(f"{path}: its trailer says {expected} records where {count} precede it")
            if not line.endswith("\n"):
                break
            count += 1
            yield line
    raise TornFile(f"{path}: cut short after {count} records (its trailer is missing); the next build makes it again")


def chunked(items: Iterable[T], size: int) -> Iterator[list[T]]:
    """`items` in lists of `size` (the last shorter), read lazily (itertools.batched from Python 3.12)."""
    iterator = iter(items)
    while chunk := list(islice(iterator, size)):
        yield chunk
