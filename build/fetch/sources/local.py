"""Files already in the repository: a path relative to its root, a file or a folder.

The path must stay inside the repository once symbolic links are resolved (the manifest validator
refuses absolute paths and `..`; this catches a link out), so a manifest cannot copy, and then
publish, any file the builder can read.
"""
from __future__ import annotations

from pathlib import Path

from mmbu.build.fetch.model import FetchedFile, FetchError
from mmbu.build.fetch.sources.context import FetchContext, RemoteContext, RemoteFile, tree_files
from mmbu.core.confinement import inside
from mmbu.curation.manifest.source import LocalSource


def local_files(source: LocalSource, repo_root: Path) -> tuple[Path, list[str]]:
    """(folder, file names relative to it) of a local source; FetchError if it is missing or empty."""
    path = repo_root / source.path
    if path.exists() and not inside(repo_root, path):
        raise FetchError(f"local source {source.path} resolves to {path.resolve()}, outside the repository "
                         f"{repo_root}; a local source must be a folder or file of the repository itself")
    if path.is_file():
        return path.parent, [path.name]
    if not path.is_dir():
        raise FetchError(f"local source {source.path} does not exist (looked in {path})")
    names = tree_files(path, source.patterns)
    if not names:
        raise FetchError(f"local source {source.path} has no files matching {source.patterns or '*'}")
    return path, names


def fetch_local(source: LocalSource, context: FetchContext) -> list[FetchedFile]:
    folder, names = local_files(source, context.repo_root)
    return [context.copy_in(folder, name, origin=f"{folder}/{name}", links_within=context.repo_root) for name in names]


def local_remote_files(source: LocalSource, context: RemoteContext) -> list[RemoteFile]:
    folder, names = local_files(source, context.repo_root)
    return [RemoteFile(name=name, size=(folder / name).stat().st_size, basis="disk") for name in names]


def fetch_mirror(mirror_dir: Path, context: FetchContext) -> list[FetchedFile]:
    """Every file of `$MMBU_MIRROR/<id>/` (laid out like raw/<id>/ before extraction); pins still apply."""
    names = tree_files(mirror_dir)
    if not names:
        raise FetchError(f"the mirror folder {mirror_dir} is empty")
    return [context.copy_in(mirror_dir, name, origin="mirror", links_within=mirror_dir) for name in names]
