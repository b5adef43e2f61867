"""Archives that come out of a fetched archive: extracted too when the manifest's source names them.

Some sources pack archives in archives: CCAgT's Mendeley zip holds one zip per slide in `images/` and
`masks/`, extracted beside themselves (torch-em's loader); the AUL liver ultrasound zip holds `Benign.zip`,
`Malignant.zip`, `Normal.zip`, each extracted into a folder of its own name (UltraSam's converter).
`source.nested_archives` lists globs of such inner archives and where each goes (`into: beside | folder`).
Only what the manifest names is extracted, one level deep; an archive inside an inner archive stays.

Every inner archive goes through the same checks as a fetched one (`archives.extract_archive`: paths,
links, member count, size, expansion ratio), and the dataset as a whole must stay within the same caps:
all extracted bytes together at most `max_total_bytes`, and at most `max_ratio` times the bytes
downloaded, so a small archive cannot unfold into a bomb one level further down.
"""
from __future__ import annotations

from pathlib import Path

from mmbu.build.fetch.archives import (
    ARCHIVE_SUFFIXES,
    ExtractLimits,
    archive_members_size,
    extract_archive,
    is_archive,
    looks_like_archive,
)
from mmbu.build.fetch.model import FetchError
from mmbu.core.confinement import inside
from mmbu.curation.manifest.hints import did_you_mean
from mmbu.curation.manifest.source import NestedArchives


def extract_nested(staging: Path, nested: list[NestedArchives], downloaded_bytes: int, limits: ExtractLimits) -> None:
    """Extract the inner archives `nested` names, in the order listed, each removed once extracted."""
    tree_bytes = _tree_bytes(staging)
    for entry in nested:
        found = [path for path in sorted(staging.glob(entry.archives)) if path.is_file() and inside(staging, path)]
        if not found:
            present = sorted(path.relative_to(staging).as_posix() for path in staging.rglob("*")
                             if path.is_file() and looks_like_archive(path))
            raise FetchError(f"nested_archives {entry.archives!r} matches no file among the extracted ones"
                             f"{did_you_mean(entry.archives, present)}")
        for archive in found:
            relative = archive.relative_to(staging).as_posix()
            if not is_archive(archive):
                raise FetchError(f"nested_archives {entry.archives!r} matches {relative}, which is not a zip or tar "
                                 "archive")
            unpacked = archive_members_size(archive)
            tree_bytes += unpacked - archive.stat().st_size
            if tree_bytes > limits.max_total_bytes:
                raise FetchError(f"inner archive {relative} would bring the dataset to {tree_bytes} bytes, more than "
                                 f"the {limits.max_total_bytes} allowed")
            if tree_bytes > limits.max_ratio * max(downloaded_bytes, 1):
                raise FetchError(f"inner archive {relative} would make the dataset {tree_bytes / max(downloaded_bytes, 1):.0f} "
                                 f"times the {downloaded_bytes} bytes downloaded (over the {limits.max_ratio:.0f}-fold "
                                 "cap); refusing a possible archive bomb")
            target = archive.parent if entry.into == "beside" else archive.parent / _bare_name(archive)
            target.mkdir(parents=True, exist_ok=True)
            extract_archive(archive, target, limits)
            archive.unlink()


def _bare_name(archive: Path) -> str:
    name = archive.name
    for suffix in ARCHIVE_SUFFIXES:  # none ends another, so the order does not matter
        if name.lower().endswith(suffix):
            return name[: -len(suffix)]
    return archive.stem


def _tree_bytes(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())
