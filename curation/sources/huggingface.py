"""Hugging Face Hub dataset search (`GET {HF_ENDPOINT}/api/datasets?search=&filter=&full=true`).

Requests go through the shared polite session (one retry/rate policy per host, raw responses cached)
and every item is parsed by huggingface_hub's own `DatasetInfo`/`DatasetCardData`, so card quirks are
handled the way the Hub client handles them. The endpoint is read from HF_ENDPOINT at call time
(huggingface_hub itself reads it only at import). Pagination: the RFC 5988 `Link: <abs-url>; rel="next"`
header, followed verbatim.
"""
from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from requests.utils import parse_header_links

from mmbu.curation.http import PoliteSession
from mmbu.curation.sources._paging import Page, base_url_from_env
from mmbu.curation.sources.candidate import Candidate, SourceResponseError, as_str_list

if TYPE_CHECKING:  # huggingface_hub takes 0.25 s to import; the build imports this module only for `next_link`
    from huggingface_hub.hf_api import DatasetInfo

DEFAULT_URL = "https://huggingface.co"


def _card_value(card: Any, name: str) -> Any:
    if card is None:
        return None
    return card.get(name) if hasattr(card, "get") else getattr(card, name, None)


def candidate_from_info(info: DatasetInfo, endpoint: str = DEFAULT_URL) -> Candidate:
    """A candidate from a parsed Hub item. Licence strings: the card's first, then `license:` tags."""
    card = info.card_data
    tags = [str(tag) for tag in (info.tags or [])]
    card_licences = as_str_list(_card_value(card, "license"))
    if any(value.casefold() == "other" for value in card_licences) and _card_value(card, "license_name"):
        card_licences = [str(_card_value(card, "license_name"))] + card_licences
    tag_licences = [tag.split(":", 1)[1] for tag in tags if tag.startswith("license:")]
    source_datasets = as_str_list(_card_value(card, "source_datasets"))
    source_datasets += [tag.split(":", 1)[1] for tag in tags if tag.startswith("source_datasets:")]
    title = _card_value(card, "pretty_name") or info.id
    related = [f"paperswithcode:{info.paperswithcode_id}"] if info.paperswithcode_id else []
    return Candidate(
        source="huggingface",
        id=info.id,
        title=str(title),
        url=f"{endpoint}/datasets/{info.id}",
        description=str(getattr(info, "description", None) or ""),
        keywords=[tag for tag in tags if not tag.startswith(("license:", "region:"))]
        + as_str_list(_card_value(card, "tags")),
        license_raw=card_licences + tag_licences,
        annotations_creators=as_str_list(_card_value(card, "annotations_creators")),
        source_datasets=sorted(set(source_datasets)),
        related=related,
        file_names=[sibling.rfilename for sibling in (info.siblings or [])],
    )


def parse_dataset_item(item: Any, endpoint: str) -> Candidate:
    if not isinstance(item, Mapping) or "id" not in item:
        raise ValueError("not a dataset object with an 'id'")
    from huggingface_hub.hf_api import DatasetInfo

    return candidate_from_info(DatasetInfo(**dict(item)), endpoint)


def parse_list_page(payload: Any, url: str, link_header: str | None, endpoint: str) -> Page:
    """Read one `/api/datasets` answer (a bare JSON array) and its `Link` header."""
    if not isinstance(payload, list):
        raise SourceResponseError(f"huggingface: the answer from {url} is not a JSON array of datasets")
    page = Page([], next_page=next_link(link_header))
    for position, item in enumerate(payload):
        try:
            page.candidates.append(parse_dataset_item(item, endpoint))
        except (KeyError, TypeError, ValueError) as exc:
            page.problems.append(f"huggingface: item {position} of {url} skipped: {exc}")
    return page


def next_link(link_header: str | None) -> str | None:
    """The absolute URL of rel="next" in a Link header, or None on the last page."""
    for link in parse_header_links(link_header or ""):
        if link.get("rel") == "next" and link.get("url"):
            return link["url"]
    return None


class HuggingFaceSource:
    name = "huggingface"

    def __init__(self, session: PoliteSession, endpoint: str | None = None, page_size: int = 50):
        self.session = session
        self.endpoint = endpoint or base_url_from_env("HF_ENDPOINT", DEFAULT_URL)
        self.page_size = page_size
        self.token = os.environ.get("HF_TOKEN")

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    def search(self, params: Mapping[str, Any], max_pages: int) -> Iterator[Page]:
        """Pages for a compiled query: `search` (short) and `filter` (list of tags), full card data."""
        url: str | None = f"{self.endpoint}/api/datasets"
        query: dict[str, Any] | None = {**params, "limit": self.page_size, "full": "true"}
        for _ in range(max_pages):
            if url is None:
                return
            answer = self.session.request_json("GET", url, params=query, headers=self._headers())
            page = parse_list_page(answer.data, url, answer.headers.get("Link"), self.endpoint)
            yield page
            url, query = page.next_page, None

    def dataset(self, repo_id: str) -> Candidate:
        """One dataset by repo id (`GET /api/datasets/{repo_id}`), used to resolve Papers with Code leads."""
        url = f"{self.endpoint}/api/datasets/{repo_id}"
        answer = self.session.get_json(url, headers=self._headers())
        try:
            return parse_dataset_item(answer, self.endpoint)
        except (KeyError, TypeError, ValueError) as exc:
            raise SourceResponseError(f"huggingface: the answer from {url} is not a dataset object ({exc})") from None
