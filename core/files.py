"""Atomic file writing: a reader (or a later build step) never sees half a file.

Every writer in the toolkit goes through `atomic_file`: the bytes go to a hidden temporary file beside
the target, are flushed and fsynced, and the temporary file is renamed over the target (`os.replace`,
atomic on POSIX and Windows) only when the block ends without an exception; otherwise it is removed.
The temporary file is created with `os.open(..., 0o666)`, so the result has the permissions `open()`
would give under the user's umask, not `tempfile.mkstemp`'s private 0600.

    with atomic_file(path, "w", encoding="utf-8") as stream:   # a stream
        stream.write(text)
    with atomic_path(path) as temporary:                      # for writers that want a path
        table.to_parquet(temporary)
    write_text_atomic(path, text); write_bytes_atomic(path, data); write_json_atomic(path, value)

`durable=False` leaves out the fsync, not the rename: a killed process still never leaves half a file,
but after a power loss the renamed file may be empty. For the many small files of a build step (a PNG
and its resume record per image, ~4 ms of fsync each) the step calls `sync_to_disk()` once before it records
itself done, and checks each reused file's size and CRC (a file lost to a power cut is made again).
"""
from __future__ import annotations

import ctypes
import errno
import functools
import json
import os
import secrets
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any


def _read_umask() -> int:
    mask = os.umask(0)  # the only way to read it; done once at import, before any worker threads
    os.umask(mask)
    return mask


_UMASK = _read_umask()
FILE_MODE = 0o666 & ~_UMASK  # what open() gives
DIR_MODE = 0o777 & ~_UMASK  # what mkdir() gives; mkdtemp's private 0700 is wrong for shared data


# what the temporaries below are named (`.<target name>.<random>.tmp`), as an fnmatch pattern: the sweeps of what
# killed runs left (build/data_lock.py, the eval image cache) match this, not a copy of it
TEMPORARY_PATTERN = ".*.tmp"


def _create_temporary(target: Path) -> tuple[Path, int]:
    """A new hidden file beside `target` (never one that exists), opened for writing (named by TEMPORARY_PATTERN)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    while True:
        temporary = target.with_name(f".{target.name}.{secrets.token_hex(4)}.tmp")
        try:
            return temporary, os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            continue


class atomic_file:  # noqa: N801 - used like open()
    """`with atomic_file(target, mode, encoding) as stream:` writes `target` atomically (module docstring)."""

    def __init__(self, target: str | Path, mode: str = "wb", encoding: str | None = None, *,
                 durable: bool = True) -> None:
        self.target = Path(target)
        self.mode = mode
        self.encoding = encoding
        self.durable = durable

    def __enter__(self) -> IO:
        self.temporary, handle = _create_temporary(self.target)
        self.stream = os.fdopen(handle, self.mode, encoding=self.encoding)
        return self.stream

    def __exit__(self, exc_type: object, *exc_info: object) -> None:
        try:
            if exc_type is None:
                self.stream.flush()
                if self.durable:
                    os.fsync(self.stream.fileno())
            self.stream.close()
            if exc_type is None:
                os.replace(self.temporary, self.target)
        finally:
            self.temporary.unlink(missing_ok=True)


@contextmanager
def atomic_path(target: str | Path) -> Iterator[Path]:
    """A temporary path beside `target` for writers that open files themselves (Parquet, CSV, figures);
    it becomes `target` when the block ends without an exception, and is removed otherwise."""
    target = Path(target)
    temporary, handle = _create_temporary(target)
    os.close(handle)
    try:
        yield temporary
        with open(temporary, "rb") as written:
            os.fsync(written.fileno())
        os.replace(temporary, target)
    finally:
        temporary.unlink(missing_ok=True)


def write_bytes_atomic(path: str | Path, data: bytes, *, durable: bool = True) -> Path:
    """Write `data` to `path` atomically; returns the path."""
    with atomic_file(path, "wb", durable=durable) as stream:
        stream.write(data)
    return Path(path)


def write_text_atomic(path: str | Path, text: str, *, durable: bool = True) -> Path:
    """Write UTF-8 `text` to `path` atomically; returns the path."""
    return write_bytes_atomic(path, text.encode("utf-8"), durable=durable)


def write_json_atomic(path: str | Path, value: Any, *, sort_keys: bool = True, durable: bool = True) -> Path:
    """`value` as indented JSON (paths and other objects as strings) plus a newline, written atomically.

    Encoded onto the file a piece at a time (`json.dump`; the bytes of `json.dumps`): the whole text, and the list
    of its pieces that `dumps` joins, would cost ~1.7 KB per entry of a long list (a build step's outputs)."""
    with atomic_file(path, "w", encoding="utf-8", durable=durable) as stream:
        json.dump(value, stream, indent=2, sort_keys=sort_keys, default=str)
        stream.write("\n")
    return Path(path)


def replace_folder(staging: str | Path, target: str | Path) -> None:
    """Put the finished folder `staging` in the place of `target` (same file system) in one step.

    Where the kernel can (Linux renameat2 with RENAME_EXCHANGE), the two folders swap names atomically,
    so `target` is at every instant either the whole old folder or the whole new one, even under kill -9;
    the old one, now at `staging`'s name, is then removed. Elsewhere the old folder is renamed to
    `.<name>.old-<pid>` first; a build killed between the two renames finds it there and puts it back
    (`mmbu.build.data_lock.remove_stale_temporaries`).
    """
    staging, target = Path(staging), Path(target)
    if target.exists() and _exchange(staging, target):
        shutil.rmtree(staging, ignore_errors=True)
        return
    previous = target.with_name(f".{target.name}.old-{os.getpid()}")
    if target.exists():
        os.replace(target, previous)
    os.replace(staging, target)
    shutil.rmtree(previous, ignore_errors=True)


def _exchange(first: Path, second: Path) -> bool:
    """Atomically swap two paths' names (renameat2 RENAME_EXCHANGE); False where unsupported."""
    renameat2 = getattr(_libc(), "renameat2", None)
    if renameat2 is None:
        return False
    at_fdcwd, rename_exchange = -100, 2
    if renameat2(at_fdcwd, os.fsencode(first), at_fdcwd, os.fsencode(second), rename_exchange) == 0:
        return True
    error = ctypes.get_errno()
    if error in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):  # file system or kernel without the flag
        return False
    raise OSError(error, os.strerror(error), str(second))


@functools.lru_cache(maxsize=1)
def _libc() -> ctypes.CDLL | None:
    if sys.platform != "linux":
        return None
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


def sync_to_disk() -> None:
    """Flush every file written without `durable` to disk (one sync for a step's many small files)."""
    os.sync()
