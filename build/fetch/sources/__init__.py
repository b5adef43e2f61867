"""One adapter per manifest source kind; each puts the dataset's files into the staging folder.

An adapter is `fetch(source, context) -> list[FetchedFile]`, registered in `ADAPTERS` by source kind.
Files are named as they will lie under `raw/<id>/` before archive extraction. `REMOTE_FILES` holds, per
kind, `remote_files(source, RemoteContext) -> list[RemoteFile]`: what the host says it will provide
(names and sizes) without downloading anything, for the fetch plan. `STATED_DIGESTS` holds the md5/sha256 a
manifest writes for its files, which a mirror copy must match.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mmbu.build.fetch.model import FetchedFile
from mmbu.build.fetch.sources.context import FetchContext, RemoteContext, RemoteFile
from mmbu.build.fetch.sources.figshare import fetch_figshare, figshare_remote_files
from mmbu.build.fetch.sources.huggingface import fetch_huggingface, huggingface_remote_files
from mmbu.build.fetch.sources.kaggle import fetch_kaggle, kaggle_remote_files
from mmbu.build.fetch.sources.local import fetch_local, local_remote_files
from mmbu.build.fetch.sources.url import fetch_url, url_remote_files, url_stated_digests
from mmbu.build.fetch.sources.zenodo import fetch_zenodo, zenodo_remote_files

Adapter = Callable[[Any, FetchContext], list[FetchedFile]]

ADAPTERS: dict[str, Adapter] = {
    "zenodo": fetch_zenodo,
    "figshare": fetch_figshare,
    "huggingface": fetch_huggingface,
    "kaggle": fetch_kaggle,
    "url": fetch_url,
    "local": fetch_local,
}

REMOTE_FILES: dict[str, Callable[[Any, RemoteContext], list[RemoteFile]]] = {
    "zenodo": zenodo_remote_files,
    "figshare": figshare_remote_files,
    "huggingface": huggingface_remote_files,
    "kaggle": kaggle_remote_files,
    "url": url_remote_files,
    "local": local_remote_files,
}

# Digests a manifest states for its files (name -> {"md5" | "sha256": hex}), per kind: a file taken from the
# mirror is checked against them as a download is (Zenodo's and figshare's md5 come from the host's API, not the manifest).
STATED_DIGESTS: dict[str, Callable[[Any], dict[str, dict[str, str]]]] = {
    "url": url_stated_digests,
}

__all__ = ["ADAPTERS", "REMOTE_FILES", "STATED_DIGESTS", "FetchContext", "RemoteContext", "RemoteFile"]
