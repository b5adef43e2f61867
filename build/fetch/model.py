"""What a fetch produces: per-file facts, the per-dataset result and the completion record."""
from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from mmbu.core.text import printable_path

COMPLETION_RECORD = ".mmbu-fetch.json"  # inside raw/<id>/; its presence means "complete and verified"


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
    fetched_from: Literal["mirror", "zenodo", "huggingface", "kaggle", "url", "local"]
    fetched_at: str
    toolkit_version: str
    files: list[FetchedFile]
    stored: list[StoredFile]
    resolved: dict[str, Any] = Field(default_factory=dict, description="Revision/version resolved for an unpinned source.")


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
