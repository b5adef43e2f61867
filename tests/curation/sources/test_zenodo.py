"""Zenodo records search against the replayed API: pagination, licence traps, throttling, bad answers."""
import pytest

from mmbu.curation.http import HttpError
from mmbu.curation.sources import SourceResponseError
from mmbu.curation.sources.zenodo import ZenodoSource, parse_search_page
from support.loopback import Reply


def test_search_follows_links_next_until_the_last_page_and_honours_retry_after(apis, session):
    source = ZenodoSource(session)
    pages = list(source.search({"q": '(title:"chest radiograph") AND segmentation', "type": "dataset"}, max_pages=10))

    ids = [c.id for page in pages for c in page.candidates]
    assert ids == ["11012345", "11020002", "11020003", "11020004"]
    assert [p.next_page is None for p in pages] == [False, True]  # last page has no links.next
    first = apis.requests_to("/api/records")
    assert first[0].query["size"] == ["25"] and first[0].query["type"] == ["dataset"]
    assert first[0].headers["user-agent"].startswith("mmbu/")
    assert 1.0 in session.sleeps  # the 429's Retry-After: 1 was honoured before the retry
    assert len(first) == 3  # 429, page 1, page 2


def test_record_fields_and_licence_traps(apis, session):
    source = ZenodoSource(session)
    found = {c.id: c for page in source.search({"q": '"chest radiograph"'}, 5) for c in page.candidates}
    chest = found["11012345"]
    assert chest.url == f"{apis.url}/records/11012345"
    assert chest.doi == "10.5281/zenodo.11012345"
    assert chest.license_raw == ["cc-by-4.0"]
    assert "<p>" not in chest.description and chest.description.startswith("1,200 frontal CXRs")
    assert chest.file_names == ["images.zip"]
    assert found["11020003"].license_raw == []  # "license": null
    assert found["11020004"].license_raw == []  # no license key at all
    blood = source.dataset("11020001")
    assert blood.license_raw == ["cc-zero"] and blood.title.startswith("Blood smear")


def test_html_instead_of_json_is_a_clear_error(loopback, monkeypatch, session):
    loopback.add("GET", "/api/records", Reply(200, "<html><body>Maintenance</body></html>", {"Content-Type": "text/html"}))
    monkeypatch.setenv("MMBU_ZENODO_URL", loopback.url)
    with pytest.raises(HttpError, match="expected JSON but got text/html"):
        list(ZenodoSource(session).search({"q": "x"}, 1))


def test_malformed_envelope_and_hits():
    with pytest.raises(SourceResponseError, match="no hits.hits list"):
        parse_search_page({"message": "oops"}, "http://z/api/records")
    page = parse_search_page({"hits": {"hits": [{"id": 1, "metadata": {}}, {"id": 2, "metadata": {"title": "ok"}}],
                                       "total": 2}, "links": {}}, "http://z/api/records")
    assert [c.id for c in page.candidates] == ["2"]
    assert "hit 0" in page.problems[0] and "title" in page.problems[0]


def test_client_error_names_the_url(loopback, monkeypatch, session):
    loopback.add("GET", "/api/records", Reply(400, {"status": 400, "message": "A validation error occurred."}))
    monkeypatch.setenv("MMBU_ZENODO_URL", loopback.url)
    with pytest.raises(HttpError, match="HTTP 400 .*/api/records"):
        list(ZenodoSource(session).search({"q": "x"}, 1))
