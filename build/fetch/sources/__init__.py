"""One adapter per manifest source kind; each puts the dataset's files into the staging folder.

An adapter is `fetch(source, context) -> list[FetchedFile]`, registered in `ADAPTERS` by source kind.
Files are named as they will lie under `raw/<id>/` before archive extraction. `REMOTE_FILES` holds, per
kind, `remote_files(source, RemoteContext) -> list[RemoteFile]`: what the host says it will provide
(names and sizes) without downloading anything, for the fetch plan.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mmbu.build.fetch.model import FetchedFile
from mmbu.build.fetch.sources.context import FetchContext, RemoteContext, RemoteFile
from mmbu.build.fetch.sources.huggingface import fetch_huggingface, huggingface_remote_files
from mmbu.build.fetch.sources.kaggle import fetch_kaggle, kaggle_remote_files
from mmbu.build.fetch.sources.local import fetch_local, local_remote_files
from mmbu.build.fetch.sources.url import fetch_url, url_remote_files
from mmbu.build.fetch.sources.zenodo import fetch_zenodo, zenodo_remote_files

Adapter = Callable[[Any, FetchContext], list[FetchedFile]]

ADAPTERS: dict[str, Adapter] = {
    "zenodo": fetch_zenodo,
    "huggingface": fetch_huggingface,
    "kaggle": fetch_kaggle,
    "url": fetch_url,
    "local": fetch_local,
}

REMOTE_FILES: dict[str, Callable[[Any, RemoteContext], list[RemoteFile]]] = {
    "zenodo": zenodo_remote_files,
    "huggingface": huggingface_remote_files,
    "kaggle": kaggle_remote_files,
    "url": url_remote_files,
    "local": local_remote_files,
}

__all__ = ["ADAPTERS", "REMOTE_FILES", "FetchContext", "RemoteContext", "RemoteFile"]
