"""Kaggle datasets over Kaggle's own wire protocol (kagglesdk's `DatasetApiService/DownloadDataset`).

`POST {MMBU_KAGGLE_URL}/v1/datasets.DatasetApiService/DownloadDataset` with a camelCase JSON body and
HTTP Basic `username:key` answers with a redirect to the file; the redirect drops our credentials when it
leaves the API host (requests does that), and a resume re-sends the POST with a Range header. Kaggle
publishes no checksums, so the sha256 pinned in manifests.lock is the only guard. A manifest without `version`
is fetched at the version manifests.lock pins, or on the first fetch at `GetDataset`'s currentVersionNumber
(then pinned). The `kaggle` package is
not imported: it authenticates and prints at import time.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from mmbu.build.fetch.download import DownloadRequest
from mmbu.build.fetch.model import FetchedFile, FetchError
from mmbu.build.fetch.sources.context import FetchContext, RemoteContext, RemoteFile
from mmbu.curation.manifest.source import KaggleSource

DEFAULT_URL = "https://api.kaggle.com"


def kaggle_base_url() -> str:
    return (os.environ.get("MMBU_KAGGLE_URL") or DEFAULT_URL).rstrip("/")


def kaggle_credentials() -> tuple[tuple[str, str] | None, dict[str, str]]:
    """(basic auth, extra headers) from the standard places: KAGGLE_API_TOKEN (Bearer),
    KAGGLE_USERNAME + KAGGLE_KEY, or kaggle.json in $KAGGLE_CONFIG_DIR or ~/.kaggle."""
    token = os.environ.get("KAGGLE_API_TOKEN")
    if token:
        return None, {"Authorization": f"Bearer {token}"}
    user, key = os.environ.get("KAGGLE_USERNAME"), os.environ.get("KAGGLE_KEY")
    if user and key:
        return (user, key), {}
    config_dir = Path(os.environ.get("KAGGLE_CONFIG_DIR") or Path.home() / ".kaggle")
    config = config_dir / "kaggle.json"
    if config.is_file():
        try:
            data = json.loads(config.read_text(encoding="utf-8"))
            return (data["username"], data["key"]), {}
        except (OSError, ValueError, KeyError):
            raise FetchError(f"{config} is not a readable kaggle.json with username and key") from None
    raise FetchError("Kaggle needs credentials: set KAGGLE_USERNAME and KAGGLE_KEY, or put kaggle.json "
                     "in ~/.kaggle (see https://www.kaggle.com/docs/api)")


def current_version(owner: str, slug: str, auth, headers: dict[str, str], context: FetchContext) -> int:
    """The dataset's current version number (`DatasetApiService/GetDataset`, field currentVersionNumber)."""
    answer = context.session.post_json(f"{kaggle_base_url()}/v1/datasets.DatasetApiService/GetDataset",
                                       json={"ownerSlug": owner, "datasetSlug": slug}, auth=auth,
                                       headers=headers, use_cache=False)
    version = answer.get("currentVersionNumber") if isinstance(answer, dict) else None
    if not isinstance(version, int) or version < 1:
        raise FetchError(f"Kaggle dataset {owner}/{slug}: GetDataset gave no currentVersionNumber, so the version "
                         "cannot be pinned; write `version:` in the manifest")
    return version


def fetch_kaggle(source: KaggleSource, context: FetchContext) -> list[FetchedFile]:
    auth, headers = kaggle_credentials()
    owner, slug = source.dataset.split("/", 1)
    # No version in the manifest: the lock's pin, or (first fetch) the current version, then pinned.
    version = context.pinned_or_resolved("version", source.version,
                                         lambda: current_version(owner, slug, auth, dict(headers), context))
    url = f"{kaggle_base_url()}/v1/datasets.DatasetApiService/DownloadDataset"
    fetched = []
    for file_name in source.files or [None]:
        body = {"ownerSlug": owner, "datasetSlug": slug, "datasetVersionNumber": version}
        if file_name:
            body["fileName"] = file_name
        fetched.append(context.download(DownloadRequest(
            url=url, name=file_name or f"{slug}.zip", method="POST", json=body, auth=auth, headers=dict(headers),
        )))
    return fetched


def kaggle_remote_files(source: KaggleSource, context: RemoteContext) -> list[RemoteFile]:
    """The files of the pinned version with Kaggle's sizes (`ListDatasetFiles`, paged by `nextPageToken`); without
    a version in the manifest or the lock, the current one (what the first fetch will pin).

    Kaggle states each file's `totalBytes`, not the size of the zip a whole-dataset download is: that
    zip's size stays unknown and the files' total is given as what it will unpack to.
    """
    auth, headers = kaggle_credentials()
    owner, slug = source.dataset.split("/", 1)
    version = source.version or context.pinned.get("version")
    shown = f"Kaggle dataset {source.dataset}" + (f" version {version}" if version else "")
    url = f"{kaggle_base_url()}/v1/datasets.DatasetApiService/ListDatasetFiles"
    sizes: dict[str, int] = {}
    token: str | None = None
    while True:
        body = {"ownerSlug": owner, "datasetSlug": slug, "pageSize": 200}
        if version:
            body["datasetVersionNumber"] = version
        if token:
            body["pageToken"] = token
        answer = context.session.post_json(url, json=body, auth=auth, headers=headers, use_cache=False)
        if answer.get("errorMessage"):
            raise FetchError(f"{shown}: {answer['errorMessage']}")
        for entry in answer.get("datasetFiles") or []:
            sizes[entry.get("name") or entry.get("ref")] = int(entry.get("totalBytes") or 0)
        token = answer.get("nextPageToken")
        if not token:
            break
    if source.files:
        missing = [name for name in source.files if name not in sizes]
        if missing:
            raise FetchError(f"{shown} has no file(s) {', '.join(missing)}")
        return [RemoteFile(name=name, size=sizes[name], basis="kaggle") for name in source.files]
    return [RemoteFile(name=f"{slug}.zip", size=None, basis="kaggle", uncompressed=sum(sizes.values()))]
