"""Where a dataset's files come from: Zenodo, Hugging Face, Kaggle, plain URLs or a local path."""
from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from mmbu.core.confinement import stays_inside

HEX40 = r"^[0-9a-f]{40}$"

# a local source's path: relative to the repository root, never out of it (the fetch checks links too)
RepositoryPath = Annotated[str, AfterValidator(stays_inside("the repository"))]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ZenodoSource(_Strict):
    """A Zenodo *version* record (never the concept id, which silently moves to new versions)."""

    kind: Literal["zenodo"]
    record: int = Field(gt=0)
    files: list[str] | None = Field(None, description="File keys to fetch; all files of the record when omitted.")


class HuggingFaceSource(_Strict):
    """A dataset repo at a commit. Leave `revision` out when no source states one: the first `mmbu fetch`
    resolves the default branch to its commit sha, pins it in manifests.lock and fetches that commit after."""

    kind: Literal["huggingface"]
    repo: str = Field(pattern=r"^[\w.-]+/[\w.-]+$")
    revision: str | None = Field(
        None, pattern=HEX40,
        description="Commit sha (40 hex) read from a source; branch names are not reproducible. "
                    "Omitted: pinned in manifests.lock on first fetch.")
    patterns: list[str] | None = Field(None, description="allow_patterns for the snapshot; everything when omitted.")


class KaggleSource(_Strict):
    """A Kaggle dataset at a version. Leave `version` out when no source states one: the first `mmbu fetch`
    asks Kaggle for the current version, pins it in manifests.lock and fetches that version after."""

    kind: Literal["kaggle"]
    dataset: str = Field(pattern=r"^[\w.-]+/[\w.-]+$", description="owner/slug")
    version: int | None = Field(None, gt=0, description="Version number read from a source; omitted: pinned on first fetch.")
    files: list[str] | None = None


class UrlFile(_Strict):
    url: str = Field(pattern=r"^https?://")
    name: str | None = Field(None, description="File name under raw/<id>/; the URL's last path part by default.")
    md5: str | None = Field(None, pattern=r"^[0-9a-f]{32}$")
    sha256: str | None = Field(None, pattern=r"^[0-9a-f]{64}$")


class UrlSource(_Strict):
    kind: Literal["url"]
    files: list[UrlFile] = Field(min_length=1)


class LocalSource(_Strict):
    """Files already in the repository (the path is relative to its root and cannot leave it)."""

    kind: Literal["local"]
    path: RepositoryPath
    patterns: list[str] | None = None


Source = Annotated[
    ZenodoSource | HuggingFaceSource | KaggleSource | UrlSource | LocalSource,
    Field(discriminator="kind"),
]
