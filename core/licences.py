"""Raw licence strings of each host (Zenodo's legacy ids, Hugging Face ids, Kaggle's free text) to SPDX ids.

One table (`licences.yaml` beside this file) and one normaliser for every stage: discovery screens a
candidate's licence with it, fetch re-checks a Zenodo record's licence against the manifest with it.
Strings in no table are tried as SPDX ids through license-expression's SPDX licensing ("cc-by-4.0",
"apache-2.0", "MIT" need no row); a private `LicenseRef-` or anything else unknown is not a licence.
"""
from __future__ import annotations

import re
from functools import cache
from pathlib import Path

from typing import TYPE_CHECKING

from mmbu.core.yaml_io import read_yaml

if TYPE_CHECKING:
    from license_expression import ExpressionInfo, Licensing

LICENCE_TABLES_PATH = Path(__file__).with_name("licences.yaml")

LicenceTables = dict[str, dict[str, str | None]]
"""host ("zenodo", "huggingface", "kaggle") -> folded raw string -> SPDX id, or None for "not a clear licence"."""


def fold(text: str) -> str:
    """How raw strings are compared: case folded, runs of white space as one space."""
    return re.sub(r"\s+", " ", text.strip().casefold())


@cache
def load_licence_tables(path: Path = LICENCE_TABLES_PATH) -> LicenceTables:
    document = read_yaml(path) or {}
    return {
        source: {fold(str(raw)): spdx for raw, spdx in (table or {}).items()}
        for source, table in document.items()
        if source != "schema_version"
    }


@cache
def spdx_licensing() -> Licensing:
    """license-expression's SPDX licensing, built once per process (imported when first needed)."""
    from license_expression import get_spdx_licensing

    return get_spdx_licensing()


def validate_spdx(text: str, *, strict: bool = True) -> ExpressionInfo:
    """`Licensing.validate` of `text`, raising ExpressionError for a malformed expression.

    license-expression's validate reports most parse errors in `info.errors`, but for some (`MIT AND`: an operator
    missing an operand) its own error path raises AttributeError; there the parser is asked again, and its
    ExpressionError ("AND requires two or more licenses") is what the caller gets."""
    from license_expression import ExpressionError

    licensing = spdx_licensing()
    try:
        return licensing.validate(text, strict=strict)
    except AttributeError:
        licensing.parse(text, validate=True, strict=strict)  # raises the ExpressionError validate stumbled on
        raise ExpressionError(f"{text!r} is not a valid licence expression") from None


def to_spdx(raw: str, source: str, tables: LicenceTables | None = None) -> tuple[bool, str | None]:
    """`(known, spdx)` for one raw string of `source`'s: `known=False` means no table row and not an SPDX id
    either; `(True, None)` is a string the table knows as no clear licence (Zenodo's `other-open`)."""
    tables = tables if tables is not None else load_licence_tables()
    key = fold(raw)
    table = tables.get(source, {})
    if key in table:
        return True, table[key]
    from license_expression import ExpressionError

    licensing = spdx_licensing()
    try:
        info = validate_spdx(raw.strip())
    except ExpressionError:
        return False, None
    if info.errors or not info.normalized_expression:
        return False, None
    symbols = licensing.license_symbols(licensing.parse(info.normalized_expression))
    if any(symbol.key.startswith("LicenseRef-") for symbol in symbols):
        return False, None
    return True, info.normalized_expression


def canonical_spdx(licence: str) -> str:
    """The SPDX expression in its canonical spelling, or the input unchanged if it is not SPDX."""
    from license_expression import ExpressionError

    try:
        return spdx_licensing().parse(licence, validate=True, strict=True).render()
    except ExpressionError:
        return licence


def same_licence(a: str, b: str) -> bool:
    """Whether two SPDX expressions name the same licence, whatever their spelling."""
    return canonical_spdx(a).lower() == canonical_spdx(b).lower()


# Creative Commons deed/legal-code URLs name the licence in their path (creativecommons.org/licenses/by-nc/4.0/,
# /licenses/by/3.0/us/ for a ported version, /publicdomain/zero/1.0/): the SPDX id is spelled from the path.
_CC_URL = re.compile(r"^https?://(?:www\.)?creativecommons\.org/(?:licenses/(?P<code>by(?:-(?:nc|nd|sa))*)"
                     r"/(?P<version>\d\.\d)(?:/(?P<port>[a-z]{2}))?|publicdomain/(?P<zero>zero)/1\.0)(?:/.*)?$",
                     re.IGNORECASE)
_OSI_URL = re.compile(r"^https?://(?:www\.)?opensource\.org/licen[sc]es?/(?P<id>[\w.+-]+?)(?:\.php|\.html)?/?$",
                      re.IGNORECASE)


def spdx_from_url(url: str) -> str | None:
    """The SPDX id a licence URL names (Creative Commons and opensource.org URLs), None for any other URL or a
    path that spells no SPDX licence. Hosts that state a licence as a name and a URL (figshare) are read by URL
    first: the URL's spelling is fixed by the licence's publisher, the name's by the host."""
    candidate = None
    if cc := _CC_URL.match(url.strip()):
        if cc["zero"]:
            candidate = "CC0-1.0"
        else:
            candidate = f"CC-{cc['code'].upper()}-{cc['version']}" + (f"-{cc['port'].upper()}" if cc["port"] else "")
    elif osi := _OSI_URL.match(url.strip()):
        candidate = osi["id"]
    if candidate is None:
        return None
    known, spdx = to_spdx(candidate, "url", tables={})
    return spdx if known else None
