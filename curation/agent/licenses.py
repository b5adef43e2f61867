"""A candidate's licence verdict from all the licence strings its record carries.

Each string goes through the toolkit's one normaliser, `mmbu.core.licences.to_spdx` (the host tables in
`core/licences.yaml`, then the SPDX list), the same that fetch uses to re-check a Zenodo record.
"""
from __future__ import annotations

from dataclasses import dataclass

from mmbu.core.licences import to_spdx


@dataclass(frozen=True)
class LicenseVerdict:
    """`spdx` is the SPDX id, or None when the raw strings give no clear licence (`reason` says why)."""

    spdx: str | None
    reason: str | None = None
    conflict: bool = False


def normalise_license(raw_values: list[str], source: str) -> LicenseVerdict:
    """One verdict from all the licence strings a record carries, in order of authority (card first, then tags).

    The first string decides (the Hub's card beats its tags, as huggingface_hub does not reconcile
    them); any later string that means something else is reported as a conflict for a reviewer.
    """
    if not raw_values:
        return LicenseVerdict(None, "the record states no licence")
    resolved = [(raw, *to_spdx(raw, source)) for raw in raw_values]  # (raw, known, spdx)
    first_raw, first_known, first_spdx = resolved[0]
    others = sorted({spdx or raw for raw, _known, spdx in resolved[1:]} - {first_spdx or first_raw})
    conflict = f"; other fields say {', '.join(others)}" if others else ""
    if first_spdx is None:
        why = "not a clear licence" if first_known else "not a known licence"
        return LicenseVerdict(None, f"licence {first_raw!r} is {why}{conflict}", conflict=bool(others))
    if others:
        return LicenseVerdict(first_spdx, f"kept {first_spdx} from {first_raw!r}{conflict}", conflict=True)
    return LicenseVerdict(first_spdx)
