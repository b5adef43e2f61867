"""One adapter per manifest source kind; each puts the dataset's files into the staging folder.

An adapter is `fetch(source, context) -> list[FetchedFile]`, registered in `ADAPTERS` by source kind.
Files are named as they will lie under `raw/<id>/` before archive extraction.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mmbu.build.fetch.model import FetchedFile
from mmbu.build.fetch.sources.context import FetchContext
from mmbu.build.fetch.sources.huggingface import fetch_huggingface
from mmbu.build.fetch.sources.kaggle import fetch_kaggle
from mmbu.build.fetch.sources.local import fetch_local
from mmbu.build.fetch.sources.url import fetch_url
from mmbu.build.fetch.sources.zenodo import fetch_zenodo

Adapter = Callable[[Any, FetchContext], list[FetchedFile]]

ADAPTERS: dict[str, Adapter] = {
    "zenodo": fetch_zenodo,
    "huggingface": fetch_huggingface,
    "kaggle": fetch_kaggle,
    "url": fetch_url,
    "local": fetch_local,
}

__all__ = ["ADAPTERS", "FetchContext"]
