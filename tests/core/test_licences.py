"""One licence table and normaliser for every stage (discovery's screening, fetch's Zenodo re-check)."""
from __future__ import annotations

import pytest

from mmbu.core.licences import canonical_spdx, load_licence_tables, same_licence, to_spdx


@pytest.mark.parametrize("raw, source, expected", [
    ("cc-zero", "zenodo", (True, "CC0-1.0")), ("cc-nc", "zenodo", (True, "CC-BY-NC-2.0")),
    ("cc-by-nc", "zenodo", (True, "CC-BY-NC-1.0")), ("cc-by-nd", "zenodo", (True, "CC-BY-ND-1.0")),
    ("CC-BY-4.0", "zenodo", (True, "CC-BY-4.0")), ("cc-by-4.0", "huggingface", (True, "CC-BY-4.0")),
    ("other-open", "zenodo", (True, None)), ("  CC0:   Public Domain ", "kaggle", (True, "CC0-1.0")),
    ("LicenseRef-scancode-proprietary", "zenodo", (False, None)), ("made-up-licence", "zenodo", (False, None)),
])
def test_raw_strings_to_spdx(raw, source, expected):
    assert to_spdx(raw, source) == expected


def test_every_table_value_is_a_current_spdx_id_in_its_canonical_spelling():
    for source, table in load_licence_tables().items():
        for raw, spdx in table.items():
            if spdx is not None:
                assert canonical_spdx(spdx) == spdx, (source, raw, spdx)


def test_same_licence_ignores_spelling_only():
    assert same_licence("cc-by-4.0", "CC-BY-4.0")
    assert not same_licence("CC-BY-4.0", "CC-BY-NC-4.0")
