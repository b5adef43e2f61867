"""Zenodo records search against the replayed API: pagination, licence traps, throttling, bad answers."""
import json

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


def test_image_pass_filters_by_type_pages_and_keeps_the_resource_type(apis, session):
    source = ZenodoSource(session)
    pages = list(source.search({"q": '"chest radiograph"', "type": "image", "sort": "bestmatch"}, max_pages=10))

    found = {c.id: c for page in pages for c in page.candidates}
    assert list(found) == ["11030001", "11030002", "11030004"]  # image records only, over two pages
    assert [p.next_page is None for p in pages] == [False, True]
    assert (found["11030001"].resource_type, found["11030002"].resource_type) == ("image-figure", "image-photo")
    assert found["11030002"].file_names[0] == "rib_001.tif" and len(found["11030002"].file_names) == 40
    first, second = apis.requests_to("/api/records")[-2:]  # after the replay's opening 429
    assert {k: v[0] for k, v in first.query.items()} == {"q": '"chest radiograph"', "type": "image",
                                                         "sort": "bestmatch", "size": "25", "page": "1"}
    assert second.query["type"] == ["image"] and second.query["page"] == ["2"]  # links.next keeps the filter


def test_subtype_narrows_the_image_pass_and_sizes_are_kept(apis, session):
    source = ZenodoSource(session)
    found = [c for page in source.search({"q": '"brightfield microscopy"', "type": "image", "subtype": "photo"}, 5)
             for c in page.candidates]
    assert [c.id for c in found] == ["11030003"]
    assert found[0].resource_type == "image-photo"
    assert found[0].file_sizes == {"films.zip": 250_000_000, "README.txt": 1001}
    assert apis.requests_to("/api/records")[-1].query["subtype"] == ["photo"]


def test_a_hit_without_resource_type_keeps_the_type_its_pass_asked_for():
    payload = {"hits": {"hits": [{"id": 5, "metadata": {"title": "Old record"}},
                                 {"id": 6, "metadata": {"title": "Typed", "resource_type": {"type": "image",
                                                                                            "subtype": "plot"}}}]},
               "links": {}}
    page = parse_search_page(payload, "http://z/api/records", searched_type="image")
    assert [c.resource_type for c in page.candidates] == ["image", "image-plot"]
    assert parse_search_page(payload, "http://z/api/records").candidates[0].resource_type is None


def test_image_pass_goes_through_the_polite_session_and_its_cache(apis, session, tmp_path):
    params = {"q": '"chest radiograph"', "type": "image", "sort": "bestmatch"}
    first = [c.id for page in ZenodoSource(session).search(params, 10) for c in page.candidates]
    assert 1.0 in session.sleeps  # the first answer was a 429 with Retry-After: 1, honoured, then retried
    sent = apis.requests_to("/api/records")
    assert len(sent) == 3 and all(r.headers["user-agent"].startswith("mmbu/") for r in sent)

    again = [c.id for page in ZenodoSource(session).search(params, 10) for c in page.candidates]
    assert again == first and len(apis.requests_to("/api/records")) == 3  # replayed from the raw-response cache
    cached = [json.loads(path.read_text()) for path in (tmp_path / "cache").rglob("*.json")]
    assert any(entry["request"]["params"] and entry["request"]["params"].get("type") == "image" for entry in cached)
