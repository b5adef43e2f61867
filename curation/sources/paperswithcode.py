"""Papers with Code as an offline index (the live API is gone since July 2025).

`build_index` runs once, on a machine with the archived dump (`pwc-archive/datasets` on the Hub, JSON,
JSON.gz, JSONL or parquet, at a pinned revision), and writes a small JSONL index: a header line with the
revision, the dump's sha256, the build date and the CC-BY-SA-4.0 attribution, then one record per dataset.
`PwcIndex` searches it with SQLite FTS5's BM25 over name, full name, variants and description.
Hits are `Lead`s: links to resolve to a real host (`lead_refs`), never candidates themselves.
"""
from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import sqlite3
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from mmbu.core.files import atomic_file
from mmbu.curation.sources.candidate import Lead, SourceRef, as_str_list

INDEX_KIND = "mmbu-pwc-index"
ATTRIBUTION = ("Papers with Code datasets, archived by the pwc-archive organisation on Hugging Face "
               "(snapshot 2025-07-28); licence CC-BY-SA-4.0.")
IMAGE_MODALITIES = ("images", "medical", "3d", "videos", "biomedical")
_ZENODO = re.compile(r"zenodo\.org/(?:records?|deposit)/(\d+)|10\.5281/zenodo\.(\d+)", re.IGNORECASE)
_HF = re.compile(r"(?:huggingface\.co|hf\.co)/datasets/([\w.-]+/[\w.-]+)", re.IGNORECASE)
_KAGGLE = re.compile(r"kaggle\.com/(?:datasets/)?([\w.-]+/[\w.-]+)", re.IGNORECASE)
_KAGGLE_NOT_DATASETS = {"competitions", "code", "c", "discussions", "models", "docs", "kernels", "learn"}


class PwcIndexError(ValueError):
    """The index file is missing or not an MMBU Papers with Code index (message names the file)."""


def _read_dump_rows(path: Path) -> Iterator[dict[str, Any]]:
    name = path.name.lower()
    if name.endswith(".parquet"):
        import pyarrow.parquet as pq

        for batch in pq.ParquetFile(path).iter_batches():
            yield from batch.to_pylist()
        return
    opener = gzip.open if name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as handle:
        if ".jsonl" in name:
            for line in handle:
                if line.strip():
                    yield json.loads(line)
        else:
            document = json.load(handle)
            yield from (document if isinstance(document, list) else document.get("results", []))


def _slug(url: str | None, name: str) -> str:
    if url and "/dataset/" in url:
        return url.rstrip("/").rsplit("/dataset/", 1)[1]
    return re.sub(r"[^a-z0-9]+", "-", name.casefold()).strip("-")


def normalise_record(row: dict[str, Any]) -> dict[str, Any]:
    """The fields the index keeps from one dump row (schema of `datasets.json.gz`, tolerant of extras)."""
    name = str(row.get("name") or row.get("full_name") or "").strip()
    if not name:
        raise ValueError("record has no name")
    paper = row.get("paper") if isinstance(row.get("paper"), dict) else {}
    loaders = [item for item in row.get("data_loaders") or [] if isinstance(item, dict)]
    tasks = [t.get("task") if isinstance(t, dict) else t for t in row.get("tasks") or []]
    return {
        "id": _slug(row.get("url"), name),
        "name": name,
        "full_name": row.get("full_name") or None,
        "variants": as_str_list(row.get("variants")),
        "url": row.get("url"),
        "homepage": row.get("homepage"),
        "paper_url": paper.get("url"),
        "paper_title": paper.get("title"),
        "description": str(row.get("description") or ""),
        "modalities": as_str_list(row.get("modalities")),
        "tasks": [str(t) for t in tasks if t],
        "introduced_date": row.get("introduced_date"),
        "num_papers": row.get("num_papers"),
        "loader_urls": [str(item.get("url") or item.get("repo")) for item in loaders if item.get("url") or item.get("repo")],
    }


def build_index(dump: Path, out: Path, revision: str, source: str = "pwc-archive/datasets") -> int:
    """Write the JSONL index from a dump file; returns the number of records. Atomic: temp + rename."""
    digest = hashlib.sha256(dump.read_bytes()).hexdigest()
    records, skipped = [], 0
    for row in _read_dump_rows(dump):
        try:
            records.append(normalise_record(row))
        except (ValueError, TypeError, AttributeError):
            skipped += 1
    header = {"kind": INDEX_KIND, "source": source, "revision": revision, "dump_file": dump.name,
              "sha256": digest, "built": time.strftime("%Y-%m-%d", time.gmtime()), "records": len(records),
              "skipped": skipped, "license": "CC-BY-SA-4.0", "attribution": ATTRIBUTION}
    with atomic_file(out, "w", encoding="utf-8") as handle:
        for entry in (header, *records):
            handle.write(json.dumps(entry, ensure_ascii=False, sort_keys=True) + "\n")
    return len(records)


def lead_refs(lead: Lead) -> list[SourceRef]:
    """Where a lead's links point: Zenodo records (also via DOI), Hub datasets, Kaggle datasets."""
    refs: dict[str, SourceRef] = {}
    for link in lead.links:
        for match in _ZENODO.finditer(link):
            ref = SourceRef(source="zenodo", id=match.group(1) or match.group(2))
            refs.setdefault(ref.ref, ref)
        for match in _HF.finditer(link):
            ref = SourceRef(source="huggingface", id=match.group(1))
            refs.setdefault(ref.ref, ref)
        for match in _KAGGLE.finditer(link):
            owner = match.group(1).split("/", 1)[0].casefold()
            if owner not in _KAGGLE_NOT_DATASETS:
                ref = SourceRef(source="kaggle", id=match.group(1))
                refs.setdefault(ref.ref, ref)
    return list(refs.values())


class PwcIndex:
    """The offline index loaded into an in-memory SQLite FTS5 table (BM25 ranking)."""

    def __init__(self, path: Path | str | None = None):
        location = path or os.environ.get("MMBU_PWC_INDEX")
        if not location:
            raise PwcIndexError("no Papers with Code index: set MMBU_PWC_INDEX to the index file")
        self.path = Path(location)
        try:
            lines = self.path.read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise PwcIndexError(f"{self.path}: cannot read the Papers with Code index ({exc.strerror})") from None
        try:
            self.header = json.loads(lines[0]) if lines else {}
        except ValueError:
            self.header = {}
        if self.header.get("kind") != INDEX_KIND:
            raise PwcIndexError(f"{self.path}: line 1 is not an {INDEX_KIND} header; build it with "
                                "`python -m mmbu.curation.sources.pwc_build`")
        self.records: list[dict[str, Any]] = []
        for number, line in enumerate(lines[1:], start=2):
            try:
                self.records.append(json.loads(line))
            except ValueError:
                raise PwcIndexError(f"{self.path}: line {number} is not valid JSON") from None
        self._db = sqlite3.connect(":memory:")
        self._db.execute("CREATE VIRTUAL TABLE pwc USING fts5(name, variants, description, tokenize='porter')")
        self._db.executemany(
            "INSERT INTO pwc(rowid, name, variants, description) VALUES (?, ?, ?, ?)",
            [(i, f"{r['name']} {r.get('full_name') or ''}", " ".join(r.get("variants") or []), r.get("description", ""))
             for i, r in enumerate(self.records)],
        )

    def search(self, words: Iterable[str], limit: int = 25, image_only: bool = True) -> list[Lead]:
        """BM25 search for records holding every phrase in `words`, best first; `image_only` keeps image records."""
        phrases = [" ".join(re.findall(r"[\w]+", w)) for w in words]
        match = " AND ".join(f'"{p}"' for p in phrases if p)
        if not match:
            return []
        rows = self._db.execute(
            "SELECT rowid, bm25(pwc, 3.0, 2.0, 1.0) FROM pwc WHERE pwc MATCH ? ORDER BY bm25(pwc, 3.0, 2.0, 1.0)",
            (match,),
        ).fetchall()
        leads = []
        for rowid, rank in rows:
            record = self.records[rowid]
            modalities = [m.casefold() for m in record.get("modalities") or []]
            if image_only and modalities and not any(m in IMAGE_MODALITIES for m in modalities):
                continue
            leads.append(self._lead(record, -rank))
            if len(leads) >= limit:
                break
        return leads

    @staticmethod
    def _lead(record: dict[str, Any], score: float) -> Lead:
        links = [u for u in (record.get("homepage"), record.get("paper_url"), *record.get("loader_urls", [])) if u]
        return Lead(id=record["id"], name=record["name"], full_name=record.get("full_name"), url=record.get("url"),
                    homepage=record.get("homepage"), paper_url=record.get("paper_url"),
                    description=record.get("description", ""), modalities=record.get("modalities") or [],
                    tasks=record.get("tasks") or [], links=links, score=round(score, 4))
