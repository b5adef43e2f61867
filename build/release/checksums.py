"""SHA256SUMS over every file of a release, in the format `sha256sum -c` reads (checked by `mmbu.core.checksums`)."""
from __future__ import annotations

from pathlib import Path

from mmbu.core.checksums import SUMS_NAME, file_sha256, verify_sha256sums

__all__ = ["SUMS_NAME", "file_sha256", "verify_sha256sums", "write_sha256sums"]


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
