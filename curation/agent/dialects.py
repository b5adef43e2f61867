"""Compile one `Query` into each source's own query language.

Zenodo: OpenSearch query_string over legacy fields, VQA/caption data kept out, sent once per resource-type
pass of discovery.yaml (`type=dataset`, then `type=image`).
Hugging Face: `search` is a substring match on repo ids, so only the short leaf phrase, plus
`filter=modality:image`. Kaggle: a plain `search` string. Papers with Code: phrases for BM25.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, NamedTuple

from mmbu.curation.agent.queries import Query
from mmbu.curation.agent.settings import DiscoverySettings

ZENODO_NEGATIVE = 'NOT (keywords:vqa OR title:"visual question" OR title:"question answering")'


def _quote(text: str) -> str:
    return '"' + text.replace("\\", " ").replace('"', " ").strip() + '"'


def to_zenodo(query: Query, resource_filter: Mapping[str, str] | None = None) -> dict[str, Any]:
    """`resource_filter` is one pass's `type` (and `subtype`) parameters; the dataset pass by default."""
    phrase = _quote(query.phrase)
    parts = [f"(title:{phrase} OR keywords:{phrase} OR description:{phrase})"]
    if query.specimen:
        parts.append(_quote(query.specimen))
    if query.task:
        parts.append(query.task)
    return {"q": " AND ".join(parts) + f" AND {ZENODO_NEGATIVE}", **(resource_filter or {"type": "dataset"}),
            "sort": "bestmatch"}


def to_huggingface(query: Query) -> dict[str, Any]:
    words = re.findall(r"[\w+]+", query.phrase)[:3]
    return {"search": " ".join(words), "filter": ["modality:image"]}


def to_kaggle(query: Query) -> dict[str, Any]:
    return {"search": " ".join(part for part in (query.phrase, query.specimen) if part)}


def to_paperswithcode(query: Query) -> list[str]:
    return [part for part in (query.phrase, query.specimen) if part]


COMPILERS = {
    "zenodo": to_zenodo,
    "huggingface": to_huggingface,
    "kaggle": to_kaggle,
    "paperswithcode": to_paperswithcode,
}


class SourceRequest(NamedTuple):
    """One request a query sends to a live source: `channel` names it in problems and counts its failures."""

    channel: str
    compiled: dict[str, Any]
    max_pages: int


def source_requests(name: str, query: Query, settings: DiscoverySettings) -> list[SourceRequest]:
    """Every request one query sends to a live source. Zenodo sends one per pass (`zenodo (type=image)`),
    each with its own page cap; the others one each, with `max_pages_per_query`."""
    if name == "zenodo":
        return [SourceRequest(f"zenodo (type={search.resource_type})", to_zenodo(query, search.params),
                              search.max_pages or settings.max_pages_per_query)
                for search in settings.zenodo.passes]
    return [SourceRequest(name, COMPILERS[name](query), settings.max_pages_per_query)]
