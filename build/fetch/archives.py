"""Safe extraction of zip and tar archives (the stdlib does the parsing; we decide what may come out).

Refused, for the whole archive: a member whose path is absolute or climbs out with `..`; symlinks,
hardlinks, devices and FIFOs; more than `max_members` entries; a declared total beyond `max_total_bytes`;
and an expansion ratio beyond `max_ratio` (an archive bomb). Nothing is written until the whole member list
has been checked, and tar extraction additionally goes through the stdlib `data` filter. Multi-file layouts
such as MRXS (`slide.mrxs` + `slide/`) come out exactly as stored.
"""
from __future__ import annotations

import shutil
import stat
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from mmbu.build.fetch.model import FetchError
from mmbu.core.confinement import OutsideFolder, confine

ARCHIVE_SUFFIXES = (".zip", ".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz")


@dataclass(frozen=True)
class ExtractLimits:
    max_total_bytes: int = 500 * 1024**3
    max_ratio: float = 200.0
    max_members: int = 2_000_000


def looks_like_archive(path: Path) -> bool:
    """By name only: a `.npz` or `.nii.gz` is never unpacked."""
    return path.name.lower().endswith(ARCHIVE_SUFFIXES)


def is_archive(path: Path) -> bool:
    """Named like an archive and really one."""
    if not looks_like_archive(path):
        return False
    return zipfile.is_zipfile(path) if path.name.lower().endswith(".zip") else tarfile.is_tarfile(path)


def _checked_path(archive: Path, name: str) -> PurePosixPath:
    path = PurePosixPath(name.replace("\\", "/"))
    if path.is_absolute() or (path.parts and path.parts[0].endswith(":")):
        raise FetchError(f"archive {archive.name} has a member with an absolute path ({name!r}); refusing to extract")
    if ".." in path.parts:
        raise FetchError(f"archive {archive.name} has a member that climbs out of the target ({name!r}); "
                         "refusing to extract")
    if "\0" in name:
        raise FetchError(f"archive {archive.name} has a member name holding a NUL character ({name!r}); "
                         "refusing to extract")
    return path


def _destination(archive: Path, target: Path, relative: PurePosixPath) -> Path:
    """Where a checked member goes, once more after resolving links (a folder of the target may be a link)."""
    try:
        return confine(target, *relative.parts, what=f"archive {archive.name} member")
    except OutsideFolder as exc:
        raise FetchError(f"{exc}; refusing to extract") from None


def _check_totals(archive: Path, members: int, total: int, limits: ExtractLimits) -> None:
    if members > limits.max_members:
        raise FetchError(f"archive {archive.name} has {members} members, more than the {limits.max_members} allowed")
    if total > limits.max_total_bytes:
        raise FetchError(f"archive {archive.name} would expand to {total} bytes, more than the "
                         f"{limits.max_total_bytes} allowed")
    packed = max(archive.stat().st_size, 1)
    if total / packed > limits.max_ratio:
        raise FetchError(f"archive {archive.name} expands {total / packed:.0f}-fold "
                         f"(over the {limits.max_ratio:.0f}-fold "
                         "cap); refusing a possible archive bomb")


def _refuse_overwrite(archive: Path, target: Path, relative: PurePosixPath) -> None:
    if (target / relative).is_file():
        raise FetchError(f"archive {archive.name} would overwrite {relative}, which another file already provides")


def extract_zip(archive: Path, target: Path, limits: ExtractLimits) -> list[str]:
    with zipfile.ZipFile(archive) as bundle:
        infos = bundle.infolist()
        total = 0
        for info in infos:
            relative = _checked_path(archive, info.filename)
            kind = stat.S_IFMT(info.external_attr >> 16)  # 0 when the zip carries no Unix file type
            if kind not in (0, stat.S_IFREG, stat.S_IFDIR):
                raise FetchError(f"archive {archive.name} has a link or special file ({info.filename!r}); "
                                 "refusing to extract")
            if not info.is_dir():
                if info.file_size / max(info.compress_size, 1) > limits.max_ratio:
                    raise FetchError(f"archive {archive.name} member {info.filename!r} expands "
                                     f"{info.file_size / max(info.compress_size, 1):.0f}-fold (over the "
                                     f"{limits.max_ratio:.0f}-fold cap); refusing a possible archive bomb")
                _refuse_overwrite(archive, target, relative)
                total += info.file_size
        _check_totals(archive, len(infos), total, limits)
        written = []
        for info in infos:
            relative = _checked_path(archive, info.filename)
            destination = _destination(archive, target, relative)
            if info.is_dir():
                destination.mkdir(parents=True, exist_ok=True)
                continue
            destination.parent.mkdir(parents=True, exist_ok=True)
            # zipfile stops at the declared size and checks the CRC, so the real output cannot exceed it.
            with bundle.open(info) as source, open(destination, "wb") as sink:
                shutil.copyfileobj(source, sink, 1 << 20)
            written.append(relative.as_posix())
    return written


def extract_tar(archive: Path, target: Path, limits: ExtractLimits) -> list[str]:
    with tarfile.open(archive, "r:*") as bundle:
        members = bundle.getmembers()
        total = 0
        for member in members:
            relative = _checked_path(archive, member.name)
            if not (member.isfile() or member.isdir()):
                raise FetchError(f"archive {archive.name} has a link or special file ({member.name!r}); "
                                 "refusing to extract")
            if member.isfile():
                _refuse_overwrite(archive, target, relative)
                _destination(archive, target, relative)
                total += member.size
        _check_totals(archive, len(members), total, limits)
        bundle.extractall(target, members=members, filter="data")
    return [PurePosixPath(m.name).as_posix() for m in members if m.isfile()]


def extract_archive(archive: Path, target: Path, limits: ExtractLimits | None = None) -> list[str]:
    """Extract `archive` into `target` after checking every member; returns the files written (relative)."""
    limits = limits or ExtractLimits()
    try:
        if archive.name.lower().endswith(".zip"):
            return extract_zip(archive, target, limits)
        return extract_tar(archive, target, limits)
    except (zipfile.BadZipFile, tarfile.TarError, EOFError, OSError) as exc:
        raise FetchError(f"archive {archive.name} cannot be extracted ({exc})") from None


def archive_members_size(archive: Path) -> int:
    """The bytes an archive declares its files hold (read from its member list; nothing is extracted)."""
    try:
        if archive.name.lower().endswith(".zip"):
            with zipfile.ZipFile(archive) as bundle:
                return sum(info.file_size for info in bundle.infolist() if not info.is_dir())
        with tarfile.open(archive, "r:*") as bundle:
            return sum(member.size for member in bundle.getmembers() if member.isfile())
    except (zipfile.BadZipFile, tarfile.TarError, EOFError, OSError) as exc:
        raise FetchError(f"archive {archive.name} cannot be read ({exc})") from None
