"""Zenodo records search (`GET {MMBU_ZENODO_URL}/api/records`), legacy "Zenodo JSON" shape.

Anonymous page size is at most 25 (a larger one is a 400 since 2025-11-14); pagination follows
`links.next`, which is absent on the last page. Licence ids are Zenodo's legacy ones (`cc-zero`, ...),
normalised later by screening.
"""
from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from mmbu.curation.http import PoliteSession
from mmbu.curation.sources._paging import Page, base_url_from_env
from mmbu.curation.sources.candidate import Candidate, SourceResponseError, as_str_list, html_to_text

DEFAULT_URL = "https://zenodo.org"
MAX_ANONYMOUS_PAGE_SIZE = 25


def resource_type_id(kind: object, subtype: object = None) -> str | None:
    """Zenodo's resource type id from a legacy type/subtype pair, as its server joins them: image + photo ->
    `image-photo` (the legacy serializer splits the RDM id back into `{"type": "image", "subtype": "photo"}`)."""
    if not kind:
        return None
    return f"{kind}-{subtype}" if subtype else str(kind)


def candidate_from_record(hit: Mapping[str, Any], base_url: str = DEFAULT_URL,
                          searched_type: str | None = None) -> Candidate:
    """One legacy-shaped record (a search hit or `GET /api/records/<id>`). Raises KeyError/TypeError if unusable.

    `searched_type` is the resource type the search pass asked for, kept when the record does not state its own.
    """
    metadata = hit.get("metadata") or {}
    record_id = str(hit["id"])
    title = metadata.get("title") or hit.get("title")
    if not title:
        raise KeyError("title")
    licence = metadata.get("license")
    licence_id = licence.get("id") if isinstance(licence, Mapping) else licence
    links = hit.get("links") or {}
    files = [f for f in as_list_of_dicts(hit.get("files")) if f.get("key")]
    kind = metadata.get("resource_type") if isinstance(metadata.get("resource_type"), Mapping) else {}
    related = [
        str(item.get("identifier"))
        for item in as_list_of_dicts(metadata.get("related_identifiers"))
        if item.get("relation") in ("isDerivedFrom", "isSourceOf", "isSupplementTo", "isPartOf") and item.get("identifier")
    ]
    return Candidate(
        source="zenodo",
        id=record_id,
        title=str(title).strip(),
        url=links.get("self_html") or links.get("html") or f"{base_url}/records/{record_id}",
        doi=hit.get("doi") or metadata.get("doi"),
        description=html_to_text(metadata.get("description")),
        keywords=as_str_list(metadata.get("keywords")),
        license_raw=as_str_list(licence_id),
        related=related,
        file_names=[str(f["key"]) for f in files],
        file_sizes={str(f["key"]): f["size"] for f in files if isinstance(f.get("size"), int)},
        resource_type=resource_type_id(kind.get("type"), kind.get("subtype")) or searched_type,
    )


def as_list_of_dicts(value: object) -> list[Mapping[str, Any]]:
    return [item for item in value if isinstance(item, Mapping)] if isinstance(value, list) else []


def parse_search_page(payload: Any, url: str, base_url: str = DEFAULT_URL, searched_type: str | None = None) -> Page:
    """Read one `/api/records` answer. Raises SourceResponseError if it is not the documented envelope."""
    hits = payload.get("hits") if isinstance(payload, Mapping) else None
    if not isinstance(hits, Mapping) or not isinstance(hits.get("hits"), list):
        raise SourceResponseError(f"zenodo: the answer from {url} has no hits.hits list; not a records search result")
    page = Page([], next_page=(payload.get("links") or {}).get("next"), total=_int_or_none(hits.get("total")))
    for position, hit in enumerate(hits["hits"]):
        try:
            page.candidates.append(candidate_from_record(hit, base_url, searched_type))
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            page.problems.append(f"zenodo: hit {position} of {url} skipped: missing or malformed field {exc}")
    return page


def _int_or_none(value: object) -> int | None:
    if isinstance(value, Mapping):  # the native RDM shape nests it as {"value": n}
        value = value.get("value")
    return value if isinstance(value, int) else None


class ZenodoSource:
    """Searches Zenodo through the shared polite session (its host policy, retries and raw-response cache)."""

    name = "zenodo"

    def __init__(self, session: PoliteSession, base_url: str | None = None, page_size: int = MAX_ANONYMOUS_PAGE_SIZE):
        self.session = session
        self.base_url = base_url or base_url_from_env("MMBU_ZENODO_URL", DEFAULT_URL)
        self.page_size = min(page_size, MAX_ANONYMOUS_PAGE_SIZE)

    def search(self, params: Mapping[str, Any], max_pages: int) -> Iterator[Page]:
        """Pages for one compiled query (`q`, `type`, ...), following `links.next` until absent or `max_pages`."""
        searched_type = resource_type_id(params.get("type"), params.get("subtype"))
        url: str | None = f"{self.base_url}/api/records"
        query: dict[str, Any] | None = {**params, "size": self.page_size, "page": 1}
        for _ in range(max_pages):
            if url is None:
                return
            answer = self.session.get_json(url, params=query)
            page = parse_search_page(answer, url, self.base_url, searched_type)
            yield page
            url, query = page.next_page, None  # links.next is absolute and carries every argument

    def dataset(self, record_id: str) -> Candidate:
        """One record by id (used to resolve Papers with Code leads)."""
        url = f"{self.base_url}/api/records/{record_id}"
        answer = self.session.get_json(url)
        if not isinstance(answer, Mapping):
            raise SourceResponseError(f"zenodo: the answer from {url} is not a record object")
        try:
            return candidate_from_record(answer, self.base_url)
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            raise SourceResponseError(f"zenodo: record {record_id} from {url} lacks field {exc}") from None
