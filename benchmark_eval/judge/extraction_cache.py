"""The cache of judge-assisted extractions and how the assisted score reads it (see :mod:`.extract`).

Kept apart from the asking (extract.py) so the scorer reads extractions without the judge's client code.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from mmbu.benchmark_eval.judge.cache import AppendOnlyCache
from mmbu.core.runs import RunFile

EXTRACT_PROMPT_VERSION = "mmbu-extract-v1"


class Extraction(BaseModel):
    """One line of ``extractions.jsonl``."""

    key: str
    reply: str
    options: tuple[str, ...]
    extractor_model: str
    prompt_version: str
    prompt_sha256: str | None = None
    option: str  # a label, "none", or "error"
    method: Literal["llm", "empty"]
    attempts: int = 0
    extractor_output: str | None = None  # the extractor's last reply (for audits), trimmed
    error: str | None = None
    created_at: float = 0.0


class ExtractionCache(AppendOnlyCache[Extraction]):
    """Extractions: :meth:`get` returns an option or "none" (never an error)."""

    model = Extraction

    @staticmethod
    def is_error(entry: Extraction) -> bool:
        return entry.option == "error"


def extraction_key(reply: str, options: tuple[str, ...], extractor_model: str, prompt_version: str) -> str:
    payload = json.dumps([reply, list(options), extractor_model, prompt_version], ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def extractions_of(run_dir: Path) -> tuple[ExtractionCache, str, str] | None:
    """(cache, extractor model, prompt version) named by the run's ``extractor.json``, or None (no assisted score)."""
    path = run_dir / RunFile.EXTRACTOR
    if not path.exists():
        return None
    meta = json.loads(path.read_text(encoding="utf-8"))
    return ExtractionCache(run_dir / RunFile.EXTRACTIONS), meta["extractor_model"], meta["prompt_version"]


def assisted_label(strict_label: str | None, reply: str, options: tuple[str, ...],
                   extractions: tuple[ExtractionCache, str, str] | None) -> tuple[str | None, str]:
    """(label, how) for the assisted score: the strict label when there is one, else the extractor's option.

    ``how`` is ``strict``, ``extracted`` (the extractor named an option), ``none`` (it named none), ``pending``
    (not extracted yet, or an extraction error: the record stays unparseable) or ``off`` (the run has no
    extractor: there is no assisted score).
    """
    if extractions is None:
        return strict_label, "off"
    if strict_label is not None:
        return strict_label, "strict"
    cache, model, version = extractions
    entry = cache.get(extraction_key(reply, options, model, version))
    if entry is None:
        return None, "pending"
    return (None, "none") if entry.option == "none" else (entry.option, "extracted")


