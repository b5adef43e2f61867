"""Reading a file a user names on the command line, when that file may be anything: a FIFO that never ends,
/dev/zero, a folder, or a regular file of gigabytes or of JSON nested a million deep.

`read_regular_file` opens without blocking (a FIFO with no writer would hang `open`), refuses anything but a
regular file, and reads at most `max_bytes`; `read_json_file` parses the result with orjson, whose nesting limit
(1,024 levels) turns a deeply nested document into an ordinary error instead of a recursion without bound.
Each problem is a `ValueError` whose message is one sentence naming the file.
"""
from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from mmbu.core.text import printable_path

DEFAULT_MAX_JSON_BYTES = 64 * 1024**2


class NotRegularFile(ValueError):
    """`path` is a FIFO, socket, device or folder; the message is one sentence naming it and what it is."""


def open_regular(path: str | Path, refusal: str = "give a file") -> BinaryIO:
    """`path` opened for reading if it is a regular file, without blocking on the way: NotRegularFile (ending with
    `refusal`) for anything else; OSError as `os.open` raises it (missing, no permission)."""
    descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    mode = os.fstat(descriptor).st_mode
    if not stat.S_ISREG(mode):
        os.close(descriptor)
        raise NotRegularFile(f"{printable_path(path)} is not a regular file ({_kind(mode)}); {refusal}")
    return os.fdopen(descriptor, "rb")  # O_NONBLOCK changes nothing for a regular file's reads


def read_regular_file(path: str | Path, max_bytes: int) -> bytes:
    """The bytes of `path`, a regular file of at most `max_bytes`; ValueError otherwise."""
    try:
        handle = open_regular(path)
    except OSError as exc:
        raise ValueError(f"{path} cannot be read ({exc.strerror or exc})") from None
    with handle:
        status = os.fstat(handle.fileno())
        if status.st_size > max_bytes:
            raise ValueError(f"{path} holds {status.st_size:,} bytes, more than the {max_bytes:,} read")
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:  # grown since the stat
        raise ValueError(f"{path} holds more than the {max_bytes:,} bytes read")
    return data


def read_json_file(path: str | Path, max_bytes: int = DEFAULT_MAX_JSON_BYTES) -> Any:
    """The JSON document in `path` (see `read_regular_file`); ValueError naming the file when it is not JSON or
    nests deeper than 1,024 levels."""
    data = read_regular_file(path, max_bytes)
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise ValueError(f"{path} is not readable JSON ({exc})") from None


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"
