"""Kaggle's JSON-over-POST list API against the replay: body shape, nextPageToken, error bodies."""
import pytest

from mmbu.curation.sources import SourceResponseError
from mmbu.curation.sources.kaggle import KaggleSource, parse_list_page
from support.loopback import Reply


def test_search_posts_the_wire_body_and_follows_next_page_token(apis, session, monkeypatch):
    monkeypatch.setenv("KAGGLE_USERNAME", "tester")
    monkeypatch.setenv("KAGGLE_KEY", "not-a-real-key")
    pages = list(KaggleSource(session).search({"search": "chest"}, max_pages=5))

    assert [c.id for p in pages for c in p.candidates] == [
        "someuser/chest-xray-pneumonia-demo", "someuser/chest-radiograph-lines-tubes", "other/chest-xray-report-costs"]
    sent = apis.requests_to("/v1/datasets.DatasetApiService/ListDatasets")
    assert [r.json()["page"] for r in sent] == [1, 2]
    assert sent[1].json()["pageToken"] == "CAEQ1" and sent[0].json()["pageSize"] == 20
    assert sent[0].headers["authorization"].startswith("Basic ")
    first = pages[0].candidates[0]
    assert first.license_raw == ["CC0: Public Domain"] and first.keywords == ["medicine", "image"]
    assert first.url == "https://www.kaggle.com/datasets/someuser/chest-xray-pneumonia-demo"


def test_resolving_a_ref_by_search(apis, session):
    found = KaggleSource(session).dataset("someuser/chest-radiograph-lines-tubes")
    assert found.title == "Chest radiograph lines and tubes detection"
    with pytest.raises(SourceResponseError, match="no dataset 'nobody/nothing'"):
        KaggleSource(session).dataset("nobody/nothing")


@pytest.mark.parametrize("body", [{"code": 429, "message": "TooManyRequests"},
                                  {"error": {"code": 429, "message": "Too many requests", "status": "RESOURCE_EXHAUSTED"}}])
def test_error_bodies_are_reported(body):
    with pytest.raises(SourceResponseError, match="429"):
        parse_list_page(body, "http://k/v1/x")


def test_a_429_status_is_retried_then_succeeds(loopback, monkeypatch, session):
    ok = {"datasets": [{"ref": "a/b", "title": "B", "licenseName": "CC BY 4.0", "unknownKey": 1}], "nextPageToken": ""}
    loopback.add("POST", "/v1/datasets.DatasetApiService/ListDatasets",
                 [Reply(429, {"error": {"code": 429, "message": "Too many requests"}}, {"Retry-After": "1"}), Reply(200, ok)])
    monkeypatch.setenv("MMBU_KAGGLE_URL", loopback.url)
    pages = list(KaggleSource(session).search({"search": "b"}, 3))
    assert [c.id for c in pages[0].candidates] == ["a/b"] and 1.0 in session.sleeps
