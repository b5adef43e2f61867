"""A folder on a full disk and a read-only folder, for tests of what commands do when the machine fails them.

As root (CI here) these are real file systems: a tmpfs of a few hundred kilobytes gives ENOSPC, a read-only
tmpfs EROFS (root ignores permission bits, so chmod cannot make a folder read-only for it). As another
user, the same faults come from the process's file-size limit (EFBIG) and from permission bits (EACCES).
Either way the command under test meets a real failing write(2), not a mock.
"""
from __future__ import annotations

import os
import resource
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

AS_ROOT = os.geteuid() == 0


@contextmanager
def full_disk(folder: Path, size_bytes: int) -> Iterator[tuple[Path, Callable[[], None] | None]]:
    """(folder whose writes run out after about `size_bytes`, preexec_fn to pass to subprocess or None).

    `grow(folder)` makes room again, as a user freeing space would.
    """
    folder.mkdir(parents=True, exist_ok=True)
    if AS_ROOT:
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_bytes}", "tmpfs", str(folder)], check=True)
        try:
            yield folder, None
        finally:
            subprocess.run(["umount", "-l", str(folder)], check=False)
    else:
        yield folder, lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (size_bytes, size_bytes))


def grow(folder: Path, size_bytes: int = 256 * 1024 * 1024) -> None:
    """Free space on a folder made by `full_disk` (as root: a larger tmpfs; otherwise the limit is per process)."""
    if AS_ROOT:
        subprocess.run(["mount", "-o", f"remount,size={size_bytes}", str(folder)], check=True)


@contextmanager
def read_only(folder: Path) -> Iterator[Path]:
    """`folder` (created empty) that nobody can write into while the context lasts."""
    folder.mkdir(parents=True, exist_ok=True)
    if AS_ROOT:
        subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(folder)], check=True)
        try:
            yield folder
        finally:
            subprocess.run(["umount", "-l", str(folder)], check=False)
    else:
        folder.chmod(0o555)
        try:
            yield folder
        finally:
            folder.chmod(0o755)
