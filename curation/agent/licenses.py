"""Raw licence strings (Zenodo legacy ids, Kaggle free text, Hub ids) to SPDX ids, from the tables in
`curation/data/licenses.yaml`; whatever is left is checked against the SPDX list by license-expression.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import yaml
from license_expression import ExpressionError, get_spdx_licensing

from mmbu.curation.data import LICENSES_PATH


@dataclass(frozen=True)
class LicenseVerdict:
    """`spdx` is the SPDX id, or None when the raw strings give no clear licence (`reason` says why)."""

    spdx: str | None
    reason: str | None = None
    conflict: bool = False


def _fold(text: str) -> str:
    return re.sub(r"\s+", " ", text.strip().casefold())


@lru_cache(maxsize=4)
def load_license_tables(path: Path = LICENSES_PATH) -> dict[str, dict[str, str | None]]:
    document = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    return {
        source: {_fold(str(raw)): spdx for raw, spdx in (table or {}).items()}
        for source, table in document.items()
        if source != "schema_version"
    }


@lru_cache(maxsize=1)
def _spdx_licensing():
    return get_spdx_licensing()


def to_spdx(raw: str, source: str, tables: dict[str, dict[str, str | None]] | None = None) -> tuple[bool, str | None]:
    """(known, spdx) for one raw string: known=False means no table row and not an SPDX id either."""
    tables = tables if tables is not None else load_license_tables()
    key = _fold(raw)
    table = tables.get(source, {})
    if key in table:
        return True, table[key]
    licensing = _spdx_licensing()
    try:
        info = licensing.validate(raw.strip(), strict=True)
    except ExpressionError:
        return False, None
    if info.errors or not info.normalized_expression:
        return False, None
    symbols = licensing.license_symbols(licensing.parse(info.normalized_expression))
    if any(symbol.key.startswith("LicenseRef-") for symbol in symbols):
        return False, None
    return True, info.normalized_expression


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
