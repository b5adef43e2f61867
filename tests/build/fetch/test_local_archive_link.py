"""A local (or mirrored) archive is hard-linked into staging, not copied: it is only hashed, extracted and removed.

Every other local file is copied, so raw/ keeps what was fetched whatever later happens to the source tree.
"""
from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path

from mmbu.build.fetch import fetch_dataset
from mmbu.build.fetch.sources.context import FetchContext
from mmbu.curation.http import PoliteSession


def _context(tmp_path: Path) -> FetchContext:
    staging = tmp_path / "staging"
    staging.mkdir()
    return FetchContext(dataset_id="x", licence="CC-BY-4.0", session=PoliteSession({}), staging=staging,
                        downloads=tmp_path / "downloads", data_dir=tmp_path, repo_root=tmp_path)


def _zip(path: Path) -> bytes:
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as bundle:
        bundle.writestr("a/one.png", b"first")
        bundle.writestr("b/two.png", b"second")
    return path.read_bytes()


def test_an_archive_is_linked_and_any_other_file_copied(tmp_path: Path):
    source = tmp_path / "src"
    data = _zip(source / "cells.zip")
    (source / "labels.csv").write_text("id,label\n", encoding="utf-8")
    context = _context(tmp_path)

    archive = context.copy_in(source, "cells.zip", origin="local", links_within=tmp_path)
    assert (context.staging / "cells.zip").stat().st_ino == (source / "cells.zip").stat().st_ino
    assert archive.size == len(data) and archive.sha256 == hashlib.sha256(data).hexdigest()

    table = context.copy_in(source, "labels.csv", origin="local", links_within=tmp_path)
    assert (context.staging / "labels.csv").stat().st_ino != (source / "labels.csv").stat().st_ino
    assert (context.staging / "labels.csv").read_text(encoding="utf-8") == "id,label\n" and table.size == 9


def test_a_linked_symlink_stores_the_content_it_points_to(tmp_path: Path):
    real = tmp_path / "elsewhere" / "real.zip"
    data = _zip(real)
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "cells.zip").symlink_to(real)
    context = _context(tmp_path)
    context.copy_in(tmp_path / "src", "cells.zip", origin="local", links_within=tmp_path)
    staged = context.staging / "cells.zip"
    assert not staged.is_symlink() and staged.read_bytes() == data and staged.stat().st_ino == real.stat().st_ino


def test_a_fetched_local_archive_leaves_its_source_as_it_was(tmp_path, write_manifest, data_dir, lock):
    repo = tmp_path / "repo"
    data = _zip(repo / "samples" / "cells.zip")
    manifest = write_manifest("zipped", {"kind": "local", "path": "samples/cells.zip"})
    result = fetch_dataset(manifest, data_dir, repo_root=repo, lock=lock)
    assert result.status == "fetched", result.error
    raw = data_dir / "raw" / "zipped"
    assert (raw / "a" / "one.png").read_bytes() == b"first" and (raw / "b" / "two.png").read_bytes() == b"second"
    assert not (raw / "cells.zip").exists()  # extracted, then removed from staging
    source = repo / "samples" / "cells.zip"
    assert source.read_bytes() == data and source.stat().st_nlink == 1  # the staging link is gone, the file intact
