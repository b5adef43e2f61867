"""One build or fetch per data folder at a time, and no leftovers from a killed one.

Two builds on one `$MMBU_DATA` delete each other's staging folders and can leave a partial release, so
`run_build` and `mmbu fetch` hold an exclusive lock on `DATA/.mmbu.lock` for their whole run. The lock is
an OS file lock (`fcntl.flock`): the kernel drops it when its holder dies, even by kill -9, so a stale
lock never blocks anyone; the file itself only says who holds it (pid, host, command, start time) for the
message the second user reads.

Holding the lock also means that every temporary file under the folder belongs to a run that is gone,
so `remove_stale_temporaries` deletes them (`.*.tmp`, `.release.tmp-<pid>/`, `.*.old-<pid>/`).
"""
from __future__ import annotations

import fcntl
import fnmatch
import json
import os
import re
import shutil
import socket
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from mmbu.core.files import TEMPORARY_PATTERN

LOCK_NAME = ".mmbu.lock"
# hidden names our atomic writers and folder swaps give their temporaries (see writer.py, release/, fetch/)
TEMPORARY_PATTERNS = (TEMPORARY_PATTERN, ".*.tmp.png", ".*.tmp-*", ".*.old-*", ".*.staging-*")
# folders of the data folder holding such temporaries (raw/<id>/ trees are never walked: they are large and
# written only through staging folders one level up). Not work/*/images or masks: the convert step writes its PNGs
# in place, vouched for by its resume records (build/convert_resume.py), so no temporary is ever made there, and
# listing them (a PNG per sample) was 0.4 s of a 410-dataset no-op rebuild
TEMPORARY_HOMES = (".", "raw", "reports", "work", "work/*")


class DataFolderBusy(Exception):
    """Another live build or fetch holds the data folder; the message names it."""


@contextmanager
def data_folder_lock(data_dir: Path, command: str) -> Iterator[None]:
    """Hold the data folder for one command; raises DataFolderBusy at once if another process holds it, and
    DataFolderLayout if a folder it writes into is a file."""
    data_dir = Path(data_dir)
    check_data_folders(data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    path = data_dir / LOCK_NAME
    handle = path.open("a+", encoding="utf-8")
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise DataFolderBusy(f"{data_dir} is in use by {_holder(path)}; wait for it to finish or stop it, "
                                 f"or use another --data folder") from None
        handle.seek(0)
        handle.truncate()
        handle.write(json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "command": command,
                                 "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "argv": sys.argv[1:3]}))
        handle.flush()
        yield
    finally:
        handle.close()  # closing releases the lock; the file stays, naming the last holder


def _holder(path: Path) -> str:
    try:
        holder = json.loads(path.read_text(encoding="utf-8"))
        return f"{holder['command']} (pid {holder['pid']} on {holder['host']}, started {holder['started']})"
    except (OSError, ValueError, KeyError, TypeError):
        return "another mmbu process"


DATA_FOLDERS = ("raw", "downloads", "work", "release", "reports")  # what the build and the fetch write below DATA/


class DataFolderLayout(Exception):
    """A folder the build writes into exists as something else (a file); one sentence naming it."""


def check_data_folders(data_dir: Path) -> None:
    """Refuse at once, in one sentence, a data folder whose `raw/`, `work/`... exists but is not a folder
    (otherwise every dataset fails alone with the same FileExistsError)."""
    for name in DATA_FOLDERS:  # the data folder itself being a file is the OS error `mmbu` reports in one sentence
        path = Path(data_dir) / name
        if (path.exists() or path.is_symlink()) and not path.is_dir():
            raise DataFolderLayout(f"cannot write {path}: a file is where a folder is needed (the build and the "
                                   "fetch keep their files in it); move it away or choose another --data")


def remove_stale_temporaries(data_dir: Path) -> int:
    """Delete what killed runs left behind; call only while holding the lock. Returns how many were removed."""
    removed = 0
    for home in TEMPORARY_HOMES:
        for folder in [Path(data_dir)] if home == "." else Path(data_dir).glob(home):
            if not folder.is_dir() or folder.is_symlink():
                continue
            # one listing per folder, hidden names only matched (a glob per pattern listed each folder five times:
            # work/<id>/ holds a file per step output)
            hidden = [entry.name for entry in os.scandir(folder) if entry.name.startswith(".")]
            for pattern in TEMPORARY_PATTERNS:
                for leftover in (folder / name for name in fnmatch.filter(hidden, pattern)):
                    if _restore_replaced_folder(leftover):
                        continue
                    if leftover.is_dir() and not leftover.is_symlink():
                        shutil.rmtree(leftover, ignore_errors=True)
                    else:
                        leftover.unlink(missing_ok=True)
                    removed += 1
    return removed


def _restore_replaced_folder(leftover: Path) -> bool:
    """A folder set aside by `replace_folder` (`.<name>.old-<pid>`) whose replacement never arrived (killed
    between its two renames, where renameat2 is not available) is put back, never deleted."""
    match = re.fullmatch(r"\.(.+)\.old-\d+", leftover.name)
    if not match or not leftover.is_dir():
        return False
    original = leftover.with_name(match.group(1))
    if original.exists():
        return False
    os.replace(leftover, original)
    return True
