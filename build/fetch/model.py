"""What a fetch produces: per-file facts, the per-dataset result and the completion record."""
from __future__ import annotations

from typing import Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, field_validator

from mmbu.core.text import printable_path

TOOLKIT_FILE_PREFIX = ".mmbu"  # what the toolkit writes into a dataset's folder is named so; no layout reads it
COMPLETION_RECORD = f"{TOOLKIT_FILE_PREFIX}-fetch.json"  # inside raw/<id>/; its presence means "complete and verified"


class FetchError(Exception):
    """One dataset could not be fetched; the message is one readable sentence naming the cause."""


class FetchedFile(BaseModel):
    """A file as fetched (before archive extraction), named relative to raw/<id>/."""

    model_config = ConfigDict(extra="forbid")

    name: str
    size: int
    sha256: str
    md5: str | None = None
    origin: str = Field(description="Where it came from: a URL (credentials removed), 'mirror' or a local path.")

    # a name that is not UTF-8 is recorded with \\xNN escapes (JSON cannot hold it); the layouts exclude the file
    _printable = field_validator("name", "origin")(printable_path)


class StoredFile(BaseModel):
    """A file as it lies in raw/<id>/ after extraction (what the no-op check looks at)."""

    model_config = ConfigDict(extra="forbid")

    path: str
    size: int

    _printable = field_validator("path")(printable_path)


class CompletionRecord(BaseModel):
    """Written last into raw/<id>/; a later fetch with the same source and pins is a no-op."""

    model_config = ConfigDict(extra="forbid")

    dataset_id: str
    source: dict[str, Any]
    licence: str
    fetched_from: Literal["mirror", "zenodo", "figshare", "huggingface", "kaggle", "url", "local"]
    fetched_at: str
    toolkit_version: str
    files: list[FetchedFile]
    stored: list[StoredFile]
    resolved: dict[str, Any] = Field(default_factory=dict, description="Revision/version resolved for an unpinned source.")


StoredPairs = tuple[tuple[str, int], ...]


def parse_completion(text: str | bytes) -> tuple[CompletionRecord, StoredPairs]:
    """A completion record with its `stored` list left empty, and that list as (path, size) pairs.

    The list names every file of an extracted archive (78K over the paper-scale benchmark's records): validating
    each entry as a StoredFile took 0.44 s of a no-op rebuild over 40 such records, orjson and a plain check a tenth
    of that. A list the plain check does not take exactly as written (another shape, a number as text, JSON that
    orjson refuses) goes through the models, so the result is always theirs; an invalid record raises ValueError."""
    try:
        document = orjson.loads(text)
    except orjson.JSONDecodeError:
        document = None
    pairs = _plain_stored_pairs(document.get("stored")) if isinstance(document, dict) else None
    if pairs is not None:
        return CompletionRecord.model_validate({**document, "stored": []}), pairs
    record = CompletionRecord.model_validate_json(text)
    return record.model_copy(update={"stored": []}), tuple((stored.path, stored.size) for stored in record.stored)


def _plain_stored_pairs(stored: Any) -> StoredPairs | None:
    """`stored` as pairs when every entry is exactly `{"path": str, "size": int}`, else None."""
    if type(stored) is not list:
        return None
    pairs = []
    for entry in stored:
        if type(entry) is not dict or len(entry) != 2:
            return None
        path, size = entry.get("path"), entry.get("size")
        if type(path) is not str or type(size) is not int:
            return None
        pairs.append((printable_path(path), size))
    return tuple(pairs)


class FetchResult(BaseModel):
    """The outcome for one dataset; also one line of the JSON-lines fetch report."""

    dataset_id: str
    status: Literal["fetched", "up_to_date", "error"]
    manifest: str | None = None
    source: str | None = None
    fetched_from: str | None = None
    files: list[FetchedFile] = Field(default_factory=list)
    bytes: int = 0
    pinned: list[str] = Field(default_factory=list, description="Files whose sha256 was pinned by this fetch.")
    resolved: dict[str, Any] = Field(default_factory=dict,
                                     description="Revision/version the fetch used for a source field the manifest leaves out.")
    seconds: float = 0.0
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.status != "error"
