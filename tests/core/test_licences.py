"""One licence table and normaliser for every stage (discovery's screening, fetch's Zenodo re-check)."""
from __future__ import annotations

import pytest

from mmbu.core.licences import canonical_spdx, load_licence_tables, same_licence, spdx_from_url, to_spdx


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


@pytest.mark.parametrize(("url", "expected"), [
    ("https://creativecommons.org/licenses/by/4.0/", "CC-BY-4.0"),
    ("http://creativecommons.org/licenses/by-nc-sa/4.0/legalcode", "CC-BY-NC-SA-4.0"),
    ("https://creativecommons.org/licenses/by-nd/4.0/deed.en", "CC-BY-ND-4.0"),
    ("http://creativecommons.org/licenses/by/3.0/us/", "CC-BY-3.0-US"),  # figshare's LicensePresenter example
    ("https://creativecommons.org/publicdomain/zero/1.0/", "CC0-1.0"),
    ("https://opensource.org/licenses/MIT", "MIT"),
    ("https://opensource.org/licenses/Apache-2.0", "Apache-2.0"),
    ("https://creativecommons.org/licenses/by/9.9/", None),  # no such version: no SPDX id
    ("https://creativecommons.org/publicdomain/mark/1.0/", None),
    ("https://www.apache.org/licenses/LICENSE-2.0", None),
    ("https://example.org/licenses/by/4.0/", None),
])
def test_a_licence_url_names_its_spdx_id(url, expected):
    assert spdx_from_url(url) == expected
