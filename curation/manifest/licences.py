"""SPDX licence checks for manifests, against the SPDX index that `license-expression` ships.

The release's licence table and any licence filter trust this field, so it must be a current SPDX id
(or an expression of them) spelled exactly as SPDX spells it: no deprecated ids (`GPL-2.0`), no
`NOASSERTION`, no private `LicenseRef-` names, no free text such as "other".
"""
from __future__ import annotations

import re
from functools import lru_cache

from license_expression import ExpressionError, Licensing, get_license_index

from mmbu.core.licences import spdx_licensing, validate_spdx

_OPERATORS = {"AND", "OR", "WITH"}


@lru_cache(maxsize=1)
def _spdx() -> tuple[Licensing, dict[str, dict]]:
    """The SPDX licensing object and the index entries by current SPDX key."""
    entries = {entry["spdx_license_key"]: entry for entry in get_license_index() if entry.get("spdx_license_key")}
    return spdx_licensing(), entries


def spdx_problem(expression: str) -> str | None:
    """Why `expression` is not an acceptable SPDX licence, or None when it is."""
    text = expression.strip()
    if not text:
        return "is empty; write the SPDX id of the dataset's licence (e.g. CC-BY-4.0)"
    if text.upper() in {"NOASSERTION", "NONE", "OTHER", "UNKNOWN"}:
        return f"{text!r} is not a licence; find the dataset's licence and write its SPDX id (e.g. CC-BY-4.0)"
    _, entries = _spdx()
    try:
        info = validate_spdx(text)
    except ExpressionError as exc:  # raised for some malformed expressions instead of being reported
        return f"{text!r} is not a valid SPDX expression ({exc})"
    if info.invalid_symbols:
        unknown = ", ".join(repr(s) for s in info.invalid_symbols if s)
        return f"{text!r} is not a valid SPDX expression" + (f": unknown id(s) {unknown}" if unknown else "")
    if info.errors:
        return f"{text!r} is not a valid SPDX expression ({'; '.join(info.errors)})"
    for key in _keys(info.normalized_expression):
        entry = entries.get(key)
        if key.startswith("LicenseRef-") or entry is None:
            return f"{key!r} is not on the SPDX licence list (private LicenseRef ids are not accepted)"
        if entry.get("is_deprecated"):
            return f"{key!r} is a deprecated licence id"
    if _squash(info.normalized_expression) != _squash(text):
        return f"{text!r} uses a deprecated or non-canonical SPDX id; write {info.normalized_expression!r}"
    return None


def _keys(expression: str) -> list[str]:
    return [token for token in re.split(r"[\s()]+", expression) if token and token not in _OPERATORS]


def _squash(expression: str) -> str:
    return " ".join(re.split(r"[\s]+", expression.replace("(", " ( ").replace(")", " ) "))).strip()
