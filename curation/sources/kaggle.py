"""Kaggle dataset search over its JSON-over-POST API (kaggle >= 2.0 / kagglesdk wire format).

`POST {MMBU_KAGGLE_URL}/v1/datasets.DatasetApiService/ListDatasets` with a camelCase JSON body; the answer
is `{"datasets": [...], "nextPageToken": "..."}`. We speak the protocol ourselves instead of importing the
`kaggle` package, which authenticates (and prints) at import time and has no base-URL setting.
Credentials, when present, come from KAGGLE_USERNAME/KAGGLE_KEY or kaggle.json (HTTP Basic).
"""
from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from mmbu.curation.http import PoliteSession
from mmbu.curation.sources._paging import Page, base_url_from_env
from mmbu.curation.sources.candidate import Candidate, SourceResponseError, as_str_list

DEFAULT_URL = "https://api.kaggle.com"
LIST_PATH = "/v1/datasets.DatasetApiService/ListDatasets"
PAGE_SIZE = 20


def kaggle_credentials() -> tuple[str, str] | None:
    """(username, key) from the environment or kaggle.json in KAGGLE_CONFIG_DIR or ~/.kaggle; None if absent."""
    user, key = os.environ.get("KAGGLE_USERNAME"), os.environ.get("KAGGLE_KEY")
    if user and key:
        return user, key
    folder = Path(os.environ.get("KAGGLE_CONFIG_DIR") or Path.home() / ".kaggle")
    try:
        stored = json.loads((folder / "kaggle.json").read_text(encoding="utf-8"))
        return str(stored["username"]), str(stored["key"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def candidate_from_dataset(item: Mapping[str, Any]) -> Candidate:
    ref = str(item["ref"])
    tags = [tag for tag in item.get("tags") or [] if isinstance(tag, Mapping)]
    return Candidate(
        source="kaggle",
        id=ref,
        title=str(item.get("title") or ref),
        url=str(item.get("url") or f"https://www.kaggle.com/datasets/{ref}"),
        description=" ".join(part for part in (item.get("subtitle"), item.get("description")) if part),
        keywords=[str(tag.get("name") or tag.get("ref")) for tag in tags if tag.get("name") or tag.get("ref")],
        license_raw=as_str_list(item.get("licenseName")),
        file_names=[str(f.get("name")) for f in item.get("files") or [] if isinstance(f, Mapping) and f.get("name")],
    )


def parse_list_page(payload: Any, url: str) -> Page:
    """Read one ListDatasets answer. Error bodies (`{"code": 429, ...}`, `{"error": {...}}`) raise."""
    code = payload.get("code") if isinstance(payload, Mapping) else None
    if isinstance(payload, Mapping) and ("error" in payload or (isinstance(code, int) and code >= 400)):
        error = payload.get("error") if isinstance(payload.get("error"), Mapping) else payload
        raise SourceResponseError(f"kaggle: {url} answered with an error: {error.get('code')} {error.get('message')}")
    if not isinstance(payload, Mapping) or not isinstance(payload.get("datasets", []), list):
        raise SourceResponseError(f"kaggle: the answer from {url} has no 'datasets' list; not a ListDatasets result")
    page = Page([], next_page=payload.get("nextPageToken") or None)
    for position, item in enumerate(payload.get("datasets", [])):
        try:
            page.candidates.append(candidate_from_dataset(item))
        except (KeyError, TypeError, ValueError) as exc:
            page.problems.append(f"kaggle: dataset {position} of {url} skipped: missing or malformed field {exc}")
    return page


class KaggleSource:
    name = "kaggle"

    def __init__(self, session: PoliteSession, base_url: str | None = None):
        self.session = session
        self.base_url = base_url or base_url_from_env("MMBU_KAGGLE_URL", DEFAULT_URL)
        self.auth = kaggle_credentials()

    def search(self, body: Mapping[str, Any], max_pages: int) -> Iterator[Page]:
        """Pages for a compiled query body (`search`, optional `tagIds`), following `nextPageToken`."""
        url = f"{self.base_url}{LIST_PATH}"
        token = ""
        for number in range(1, max_pages + 1):
            request = {**body, "page": number, "pageToken": token, "pageSize": PAGE_SIZE}
            answer = self.session.post_json(url, json=request, auth=self.auth)
            page = parse_list_page(answer, url)
            yield page
            if not page.next_page or not page.candidates:
                return
            token = page.next_page

    def dataset(self, ref: str) -> Candidate:
        """One dataset by `owner/slug`: the list API searched for the slug, then matched exactly."""
        slug = ref.split("/", 1)[-1]
        for page in self.search({"search": slug.replace("-", " ")}, max_pages=2):
            for candidate in page.candidates:
                if candidate.id.casefold() == ref.casefold():
                    return candidate
        raise SourceResponseError(f"kaggle: no dataset {ref!r} in the list results for its name")
