"""The audit's patterns hunted through the whole catalogue (`mmbu.curation.manifest.audit`).

A manifest that shows a pattern fails here unless it is listed below as awaiting its research (issue 27, point 3: the
manifests are mended by the catalogue's writers, who then take their line out). A new manifest never joins the list.
"""
from __future__ import annotations

import pytest
from support.catalogue_replica import catalogue_manifests, is_demo

from mmbu.curation.manifest.audit import audit_findings

CATALOGUE = [m for m in catalogue_manifests() if not is_demo(m)]
FINDINGS = audit_findings(CATALOGUE)

# check -> manifests found by it when the check was written, whose sources are being read again
AWAITING_RESEARCH = {
    "count_rests_on_items": set(),
    "annex_branch_citations": set(),
    "code_licence_for_data": set(),
    "unquoted_file_keys": set(),
}


@pytest.mark.parametrize("check", sorted(FINDINGS))
def test_no_manifest_shows_an_audit_pattern_beyond_those_awaiting_research(check):
    new = [line for line in FINDINGS[check] if line.split(":", 1)[0] not in AWAITING_RESEARCH[check]]
    assert not new, "\n".join(new)


def test_the_awaiting_list_names_only_manifests_that_exist():
    known = {m.id for m in CATALOGUE}
    assert not {name for names in AWAITING_RESEARCH.values() for name in names} - known
