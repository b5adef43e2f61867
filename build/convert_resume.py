"""What the convert step knows about the PNGs it made, so that a resumed step reuses them one by one.

One SQLite database per dataset (`work/<id>/converted.sqlite`), a row per PNG: the key it was made from
(source path, size, mtime, options, toolkit version), the conversion record, the PNG's size and CRC-32 and,
for an image, its perceptual hashes. It replaces a JSON sidecar per PNG: on this machine's ext4 a file
created while two other processes create theirs costs 0.3-0.6 ms of CPU (measured three at once; 0.05 ms
alone), and the sidecars were 4 % of a 410-dataset build's samples (py-spy). SQLite is one file per dataset,
looked up by primary key, so a worker's memory does not grow with its dataset either.

Nothing is fsynced here (WAL with `synchronous=NORMAL`: a kill loses at most the last uncommitted rows, a
power cut leaves an older but consistent database): the step syncs once before it records itself done, and a
PNG is reused only when its row has the same key and the file has the size and CRC the row noted, so a PNG
torn by a kill or emptied by a power cut is converted again. A database that cannot be read at all (a torn
copy, another program's file) is replaced by an empty one: every PNG is then converted again, never trusted.
"""
from __future__ import annotations

import json
import sqlite3
import zlib
from pathlib import Path
from types import TracebackType
from typing import Any

from mmbu.build.duplicates.hashing import ImageHashes, hashes_from_json, hashes_to_json

RESUME_FILE = "converted.sqlite"
_COMMIT_EVERY = 64  # rows per transaction: a kill re-converts at most these; each commit is a WAL write
_SCHEMA = ("CREATE TABLE IF NOT EXISTS png (path TEXT PRIMARY KEY, key TEXT NOT NULL, record TEXT NOT NULL, "
           "size INTEGER NOT NULL, crc32 INTEGER NOT NULL, hashes TEXT)")


class ConvertedPngs:
    """The resume records of one dataset's converted PNGs (a context manager: commits and closes on exit)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._pending = 0
        try:
            self._db = self._open()
        except sqlite3.DatabaseError:  # not a database, or torn beyond SQLite's own recovery: start empty
            for stale in (self.path, self.path.with_name(self.path.name + "-wal"),
                          self.path.with_name(self.path.name + "-shm")):
                stale.unlink(missing_ok=True)
            self._db = self._open()

    def _open(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(self.path, isolation_level=None)  # transactions opened explicitly below
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute(_SCHEMA)
            db.execute("SELECT count(*) FROM png WHERE 0").fetchall()  # a database of another shape fails here
        except sqlite3.DatabaseError:
            db.close()
            raise
        return db

    def reusable(self, png: Path, key: str) -> tuple[dict[str, Any], ImageHashes | None] | None:
        """The record and hashes of `png` when it was made from `key` and is still the file then written."""
        row = self._db.execute("SELECT key, record, size, crc32, hashes FROM png WHERE path = ?",
                               (str(png),)).fetchone()
        if row is None or row[0] != key:
            return None
        try:
            data = png.read_bytes()
            record = json.loads(row[1])
            hashes = hashes_from_json(json.loads(row[4])) if row[4] else None
        except (OSError, ValueError):
            return None
        if len(data) != row[2] or zlib.crc32(data) != row[3]:
            return None
        return record, hashes

    def remember(self, png: Path, key: str, record: dict[str, Any], data: bytes,
                 hashes: ImageHashes | None) -> None:
        """Note that `png` now holds `data`, made from `key` (call it after the file is written)."""
        if self._pending == 0:
            self._db.execute("BEGIN")
        self._db.execute("INSERT OR REPLACE INTO png VALUES (?, ?, ?, ?, ?, ?)",
                         (str(png), key, json.dumps(record, default=str), len(data), zlib.crc32(data),
                          json.dumps(hashes_to_json(hashes)) if hashes else None))
        self._pending += 1
        if self._pending >= _COMMIT_EVERY:
            self.commit()

    def commit(self) -> None:
        if self._pending:
            self._db.execute("COMMIT")
            self._pending = 0

    def close(self) -> None:
        self.commit()
        self._db.close()

    def __enter__(self) -> ConvertedPngs:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close()
