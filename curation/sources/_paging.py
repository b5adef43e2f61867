"""What every live source shares: its base URL from the environment and a typed page of results."""
from __future__ import annotations

import os
from dataclasses import dataclass, field

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
