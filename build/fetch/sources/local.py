"""Files already on disk: a path relative to the repository root (or absolute), a file or a folder."""
from __future__ import annotations

from pathlib import Path

from mmbu.build.fetch.model import FetchedFile, FetchError
from mmbu.build.fetch.sources.context import FetchContext, tree_files
from mmbu.curation.manifest.source import LocalSource


def fetch_local(source: LocalSource, context: FetchContext) -> list[FetchedFile]:
    path = Path(source.path)
    path = path if path.is_absolute() else context.repo_root / path
    if path.is_file():
        return [context.copy_in(path.parent, path.name, origin=str(path))]
    if not path.is_dir():
        raise FetchError(f"local source {source.path} does not exist (looked in {path})")
    names = tree_files(path, source.patterns)
    if not names:
        raise FetchError(f"local source {source.path} has no files matching {source.patterns or '*'}")
    return [context.copy_in(path, name, origin=f"{path}/{name}") for name in names]


def fetch_mirror(mirror_dir: Path, context: FetchContext) -> list[FetchedFile]:
    """Every file of `$MMBU_MIRROR/<id>/` (laid out like raw/<id>/ before extraction); pins still apply."""
    names = tree_files(mirror_dir)
    if not names:
        raise FetchError(f"the mirror folder {mirror_dir} is empty")
    return [context.copy_in(mirror_dir, name, origin="mirror") for name in names]
