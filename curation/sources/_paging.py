"""What every live source shares: its base URL from the environment and a typed page of results."""
from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from mmbu.curation.sources.candidate import Candidate


def base_url_from_env(variable: str, default: str) -> str:
    """The service's base URL as a user sets it (e.g. MMBU_ZENODO_URL), without a trailing slash."""
    return (os.environ.get(variable) or default).rstrip("/")


@dataclass
class Page:
    """One page of search results. `problems` names hits that could not be read (the rest are kept)."""

    candidates: list[Candidate]
    next_page: str | None = None
    total: int | None = None
    problems: list[str] = field(default_factory=list)


class LiveSource(Protocol):
    """What the agent needs from a searchable host (Zenodo, Hugging Face, Kaggle)."""

    name: str

    def search(self, compiled: Mapping[str, Any], max_pages: int) -> Iterator[Page]:
        """Pages of results for one query in this host's dialect."""

    def dataset(self, dataset_id: str) -> Candidate:
        """One dataset by the host's own id (to resolve Papers with Code leads)."""
