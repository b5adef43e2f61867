"""Where a dataset's files come from: Zenodo, figshare, Hugging Face, Kaggle, plain URLs or a local path."""
from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from mmbu.core.confinement import stays_inside

HEX40 = r"^[0-9a-f]{40}$"

# a local source's path: relative to the repository root, never out of it (the fetch checks links too)
RepositoryPath = Annotated[str, AfterValidator(stays_inside("the repository"))]
# a file of the dataset under raw/<id>/ (a Zenodo key, a Kaggle file, a URL's name); the fetch checks again
DatasetPath = Annotated[str, AfterValidator(stays_inside("the dataset's folder raw/<id>/"))]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class NestedArchives(_Strict):
    """Archives inside the fetched archives to extract too (one level deep): CCAgT's per-slide zips in
    `wg4bpm33hj-2/images/`, extracted beside themselves; AUL's `Benign.zip`, ..., each into a folder of its name."""

    archives: DatasetPath = Field(
        description="Glob of the inner archives, relative to raw/<id>/ after the fetched archives are extracted.")
    into: Literal["beside", "folder"] = Field("beside", description="beside: extract next to the archive; folder: "
                                                                    "into a folder named like the archive.")

    @model_validator(mode="before")
    @classmethod
    def _glob_alone(cls, value: object) -> object:
        return {"archives": value} if isinstance(value, str) else value


class _Fetched(_Strict):
    """What every source may add: archives inside its archives to extract as well."""

    nested_archives: list[NestedArchives] | None = Field(
        None, min_length=1, description="Inner archives to extract after the fetched ones (same safety checks); "
                                        "left out: archives inside archives stay packed.")


class ZenodoSource(_Fetched):
    """A Zenodo *version* record (never the concept id, which silently moves to new versions)."""

    kind: Literal["zenodo"]
    record: int = Field(gt=0)
    files: list[DatasetPath] | None = Field(None, description="File keys to fetch; all files of the record when omitted.")


class FigshareSource(_Fetched):
    """A figshare article at a version. Leave `version` out when no source states one: the first `mmbu fetch`
    asks figshare for the article's current version, pins it in manifests.lock and fetches that version after."""

    kind: Literal["figshare"]
    article: int = Field(gt=0, description="The figshare article id (the number in its URL and DOI "
                                           "10.6084/m9.figshare.<article>).")
    version: int | None = Field(None, gt=0, description="Article version read from a source (the DOI's .v<N>); "
                                                        "omitted: pinned in manifests.lock on first fetch.")
    files: list[DatasetPath] | None = Field(
        None, min_length=1, description="File names as the article lists them; all files of the version when omitted.")


class HuggingFaceSource(_Fetched):
    """A dataset repo at a commit. Leave `revision` out when no source states one: the first `mmbu fetch`
    resolves the default branch to its commit sha, pins it in manifests.lock and fetches that commit after."""

    kind: Literal["huggingface"]
    repo: str = Field(pattern=r"^[\w.-]+/[\w.-]+$")
    revision: str | None = Field(
        None, pattern=HEX40,
        description="Commit sha (40 hex) read from a source; branch names are not reproducible. "
                    "Omitted: pinned in manifests.lock on first fetch.")
    patterns: list[str] | None = Field(None, description="allow_patterns for the snapshot; everything when omitted.")


class KaggleSource(_Fetched):
    """A Kaggle dataset at a version. Leave `version` out when no source states one: the first `mmbu fetch`
    asks Kaggle for the current version, pins it in manifests.lock and fetches that version after."""

    kind: Literal["kaggle"]
    dataset: str = Field(pattern=r"^[\w.-]+/[\w.-]+$", description="owner/slug")
    version: int | None = Field(None, gt=0, description="Version number read from a source; omitted: pinned on first fetch.")
    files: list[DatasetPath] | None = None


class UrlFile(_Strict):
    url: str = Field(pattern=r"^https?://")
    name: DatasetPath | None = Field(None, description="File name under raw/<id>/; the URL's last path part by default.")
    md5: str | None = Field(None, pattern=r"^[0-9a-f]{32}$")
    sha256: str | None = Field(None, pattern=r"^[0-9a-f]{64}$")


class UrlSource(_Fetched):
    kind: Literal["url"]
    files: list[UrlFile] = Field(min_length=1)


class LocalSource(_Fetched):
    """Files already in the repository (the path is relative to its root and cannot leave it)."""

    kind: Literal["local"]
    path: RepositoryPath
    patterns: list[str] | None = None


Source = Annotated[
    ZenodoSource | FigshareSource | HuggingFaceSource | KaggleSource | UrlSource | LocalSource,
    Field(discriminator="kind"),
]
