"""Moved to `mmbu.core.licences` (one licence table and normaliser for discovery and fetch)."""
from __future__ import annotations

from mmbu.core.licences import canonical_spdx, same_licence, to_spdx  # noqa: F401  # re-export for work in flight


def zenodo_to_spdx(zenodo_id: str) -> str:  # re-export for work in flight: use to_spdx(zenodo_id, "zenodo")
    return to_spdx(zenodo_id, "zenodo")[1] or zenodo_id.strip()
