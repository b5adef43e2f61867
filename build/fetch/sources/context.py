"""What every source adapter gets: where to put files, the pins to honour, the session to use."""
from __future__ import annotations

import fnmatch
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mmbu.build.fetch.archives import looks_like_archive
from mmbu.build.fetch.download import ByteProgress, DownloadRequest, NoProgress, download, file_digests
from mmbu.build.fetch.lockfile import PinnedFile
from mmbu.build.fetch.model import FetchedFile, FetchError
from mmbu.core.confinement import OutsideFolder, confined_name, inside
from mmbu.core.secrets import redact_url
from mmbu.curation.http import PoliteSession


@dataclass
class FetchContext:
    dataset_id: str
    licence: str  # the manifest's SPDX id, for hosts that report a licence
    session: PoliteSession
    staging: Path  # becomes raw/<id>/ once everything is verified
    downloads: Path  # `*.part` files of this dataset (kept across runs for resuming)
    data_dir: Path
    repo_root: Path
    pins: dict[str, PinnedFile] = field(default_factory=dict)
    progress: ByteProgress = field(default_factory=NoProgress)
    # Source fields the manifest leaves out (HF revision, Kaggle version): `pinned` as manifests.lock holds them;
    # an adapter that had to resolve one (first fetch) puts the value it used in `resolved`.
    pinned: dict[str, Any] = field(default_factory=dict)
    resolved: dict[str, Any] = field(default_factory=dict)

    def pinned_or_resolved(self, name: str, stated: Any, resolve: Callable[[], Any]) -> Any:
        """The manifest's value if it states one, else the lock's pin, else `resolve()` (recorded for the lock)."""
        if stated is not None:
            return stated
        value = self.pinned.get(name)
        if value is None:
            value = resolve()
        self.resolved[name] = value
        return value

    def pinned_sha256(self, name: str) -> str | None:
        pin = self.pins.get(name)
        return pin.sha256 if pin else None

    def staged(self, name: str) -> Path:
        """Where the file a host (or the manifest) calls `name` goes in staging; FetchError when the name would
        leave it (absolute, `..`, a link out): a host names files, it never chooses where they are written."""
        try:
            return confined_name(self.staging, name, what="the file name")
        except OutsideFolder as exc:
            raise FetchError(f"{exc} (the host's or manifest's name for a file of dataset {self.dataset_id})") from None

    def download(self, request: DownloadRequest) -> FetchedFile:
        """Download one file into staging, enforcing its pin, and describe it."""
        request.sha256 = request.sha256 or self.pinned_sha256(request.name)
        pin = self.pins.get(request.name)
        if request.size is None and pin is not None:
            request.size = pin.size  # what the lock recorded bounds the download as a host's size does
        digests = download(self.session, request, self.staged(request.name), self.downloads, self.progress)
        return FetchedFile(name=request.name, size=digests.size, sha256=digests.sha256, md5=digests.md5,
                           origin=redact_url(request.url))

    def copy_in(self, source_root: Path, relative: str, origin: str, *, links_within: Path) -> FetchedFile:
        """Copy one file from a local tree into staging (mirror or local source) and describe it.

        An archive is hard-linked instead when the file system allows it: it is only read (hashed, extracted) and
        then removed from staging, so a copy of it (gigabytes, written and deleted again) buys nothing; every other
        file is copied, so that raw/ keeps what was fetched even if the source tree changes later. The source must
        resolve inside `links_within`: a local source may link within the repository, and nothing may link out of
        it."""
        source, target = source_root / relative, self.staged(relative)
        if not inside(links_within, source):
            raise FetchError(f"{source} resolves outside {links_within}; a fetched tree may not link to files "
                             "elsewhere")
        target.parent.mkdir(parents=True, exist_ok=True)
        if not (looks_like_archive(target) and _linked(source, target)):
            shutil.copyfile(source, target)  # follows links: we store the content
        digests = file_digests(target)
        return FetchedFile(name=relative, size=digests.size, sha256=digests.sha256, md5=digests.md5, origin=origin)


def _linked(source: Path, target: Path) -> bool:
    """Hard-link `target` to `source`'s content (a symlink's target); False when the file system refuses
    (another device, a file of another owner under protected_hardlinks), and the caller copies."""
    try:
        os.link(os.path.realpath(source), target)  # resolved first: Linux's link() would link the symlink itself
    except OSError:
        return False
    return True


@dataclass(frozen=True)
class RemoteFile:
    """A file a source will provide, as its host (or the lock) describes it before anything is downloaded.

    `size` is None when nobody states it; `basis` says who stated it (zenodo, figshare, huggingface, kaggle,
    content-range, manifests.lock, disk). `uncompressed` is the host's figure for what an archive holds
    (Kaggle gives the files' sizes, not the zip's).
    """

    name: str
    size: int | None
    basis: str
    uncompressed: int | None = None


def stated_size(value: object) -> int | None:
    """A size as a host states it, when it is one (a count of bytes); anything else is no statement."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


@dataclass
class RemoteContext:
    """What a source's `remote_files` needs: the session (the plan's, with short timeouts), the licence and
    what manifests.lock resolved for fields the manifest leaves out (a Hugging Face revision, a Kaggle version)."""

    session: PoliteSession
    licence: str
    repo_root: Path
    pinned: dict[str, Any] = field(default_factory=dict)


def tree_files(root: Path, patterns: list[str] | None = None, *, follow_links: bool = False) -> list[str]:
    """Regular files under `root` (relative POSIX paths, sorted), optionally filtered by glob patterns.

    A symlink is refused unless `follow_links` (a tree of links into a store, as huggingface_hub's snapshots are).
    """
    return [name for name, _ in tree_file_sizes(root, patterns, follow_links=follow_links)]


def tree_file_sizes(root: Path, patterns: list[str] | None = None, *,
                    follow_links: bool = False) -> list[tuple[str, int]]:
    """`tree_files` with each file's size: one `os.scandir` walk (a fetched archive's tens of thousands of files
    cost a pathlib glob, two checks and a stat each before), in the order of `sorted(root.rglob("*"))`."""
    if not root.is_dir():
        raise FetchError(f"{root} is not a directory")
    found: list[tuple[str, int]] = []
    folders = [("", str(root))]
    while folders:
        prefix, folder = folders.pop()
        with os.scandir(folder) as entries:
            for entry in entries:
                relative = prefix + entry.name
                if entry.is_symlink() and not follow_links:
                    raise FetchError(f"{entry.path} is a symbolic link; copy the real file into the tree instead")
                if entry.is_dir(follow_symlinks=False):  # a linked folder is not entered, as rglob does not
                    folders.append((relative + "/", entry.path))
                elif entry.is_file() and (patterns is None or any(fnmatch.fnmatch(relative, p) for p in patterns)):
                    found.append((relative, entry.stat().st_size))
    return sorted(found, key=lambda item: item[0].split("/"))  # path order: "a/b" before "a-c", as Paths sort
