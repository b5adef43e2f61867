"""Compare a host's licence id with the manifest's SPDX id (Zenodo's legacy ids normalised first)."""
from __future__ import annotations

from functools import cache
from pathlib import Path

import yaml
from license_expression import ExpressionError, get_spdx_licensing

ZENODO_IDS = Path(__file__).with_name("zenodo_licences.yaml")


@cache
def _zenodo_map() -> dict[str, str]:
    return {k.lower(): v for k, v in yaml.safe_load(ZENODO_IDS.read_text(encoding="utf-8")).items()}


def zenodo_to_spdx(zenodo_id: str) -> str:
    """`cc-zero` -> `CC0-1.0`, `cc-by-4.0` -> `CC-BY-4.0`; an unknown id is returned as given."""
    return canonical_spdx(_zenodo_map().get(zenodo_id.strip().lower(), zenodo_id.strip()))


def canonical_spdx(licence: str) -> str:
    """The SPDX expression in its canonical spelling, or the input unchanged if it is not SPDX."""
    try:
        return get_spdx_licensing().parse(licence, validate=True, strict=True).render()
    except ExpressionError:
        return licence


def same_licence(a: str, b: str) -> bool:
    return canonical_spdx(a).lower() == canonical_spdx(b).lower()
