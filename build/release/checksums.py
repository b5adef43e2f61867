"""SHA256SUMS over every file of a release, in the format `sha256sum -c` reads."""
from __future__ import annotations

import hashlib
from pathlib import Path

SUMS_NAME = "SHA256SUMS"


def file_sha256(path: Path) -> str:
    """Hex SHA-256 of a file, read into one reused buffer (memory stays flat for shards of 500 MB)."""
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def write_sha256sums(release_dir: Path, known: dict[Path, str] | None = None) -> Path:
    """Hash every file under `release_dir` (except SHA256SUMS itself), sorted by path.

    `known` holds digests already computed for unchanged files (the shards, hashed for croissant).
    """
    known = known or {}
    lines = [f"{known.get(path) or file_sha256(path)}  {path.relative_to(release_dir).as_posix()}"
             for path in sorted(p for p in release_dir.rglob("*") if p.is_file() and p.name != SUMS_NAME)]
    target = release_dir / SUMS_NAME
    target.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return target


def verify_sha256sums(release_dir: Path) -> list[str]:
    """Problems found (empty when every listed file matches and no file is unlisted)."""
    problems = []
    listed = set()
    for line in (release_dir / SUMS_NAME).read_text(encoding="utf-8").splitlines():
        expected, name = line.split("  ", 1)
        listed.add(name)
        path = release_dir / name
        if not path.is_file():
            problems.append(f"{name}: listed but missing")
        elif file_sha256(path) != expected:
            problems.append(f"{name}: checksum differs")
    for path in release_dir.rglob("*"):
        name = path.relative_to(release_dir).as_posix()
        if path.is_file() and path.name != SUMS_NAME and name not in listed:
            problems.append(f"{name}: not listed")
    return problems
