"""SHA256SUMS of a release, in the format `sha256sum -c` reads: hashing and checking (writing is the build's).

The build writes it over every file of the release; `mmbu release push` uploads it with the release and an
evaluation of a release downloaded from the Hub checks it before reading a row. `PUSH_RECORD` (where the release
was published, written after the build) is the one file it does not cover.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

SUMS_NAME = "SHA256SUMS"
PUSH_RECORD = "pushes.json"  # `mmbu release push`'s record of the commits the release was published as
NOT_COVERED = (SUMS_NAME, PUSH_RECORD)


def file_sha256(path: Path) -> str:
    """Hex SHA-256 of a file, read into one reused buffer (memory stays flat for shards of 500 MB)."""
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def verify_sha256sums(release_dir: Path, ignore: tuple[str, ...] = ()) -> list[str]:
    """Problems found (empty when every listed file matches and no file is unlisted); `ignore`: more files that a
    copy may hold and the release does not (the `.gitattributes` a Hub repository gets)."""
    release_dir = Path(release_dir)
    sums = release_dir / SUMS_NAME
    if not sums.is_file():
        return [f"{SUMS_NAME}: missing"]
    problems = []
    listed = set()
    for line in sums.read_text(encoding="utf-8").splitlines():
        expected, name = line.split("  ", 1)
        listed.add(name)
        path = release_dir / name
        if not path.is_file():
            problems.append(f"{name}: listed but missing")
        elif file_sha256(path) != expected:
            problems.append(f"{name}: checksum differs")
    for path in release_dir.rglob("*"):
        name = path.relative_to(release_dir).as_posix()
        if path.is_file() and name not in NOT_COVERED and name not in ignore and name not in listed:
            problems.append(f"{name}: not listed")
    return problems
