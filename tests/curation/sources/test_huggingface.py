"""Hub dataset search against the replayed API: absolute Link pagination, card data, licence conflicts."""
import pytest

from mmbu.curation.sources import SourceResponseError
from mmbu.curation.sources.huggingface import HuggingFaceSource, next_link
from support.loopback import Reply


def test_search_follows_the_absolute_link_header(apis, session):
    source = HuggingFaceSource(session)
    pages = list(source.search({"search": "chest x ray", "filter": ["modality:image"]}, max_pages=5))

    ids = [c.id for page in pages for c in page.candidates]
    assert ids == ["someorg/chest-xray-demo", "someorg/chest-xray-vqa-instruct", "labs/chest-xray-llm-labels",
                   "labs/chest-xray-mixed-licence"]
    sent = apis.requests_to("/api/datasets")
    assert sent[0].query["filter"] == ["modality:image"] and sent[0].query["full"] == ["true"]
    assert sent[1].query["cursor"] == ["2"]  # the second request is the Link URL, verbatim
    assert pages[-1].next_page is None


def test_card_fields_are_read_through_huggingface_hub(apis, session):
    found = {c.id: c for p in HuggingFaceSource(session).search({"search": "chest x ray"}, 5) for c in p.candidates}
    demo = found["someorg/chest-xray-demo"]
    assert demo.title == "Chest X-ray demo" and demo.url == f"{apis.url}/datasets/someorg/chest-xray-demo"
    assert demo.license_raw == ["cc-by-4.0", "cc-by-4.0"]  # card first, then the tag
    assert demo.annotations_creators == ["expert-generated"]
    assert "data/train-00000-of-00001.parquet" in demo.file_names
    assert found["someorg/chest-xray-vqa-instruct"].source_datasets == ["mimic-cxr"]
    assert found["labs/chest-xray-mixed-licence"].license_raw == ["other", "cc-by-4.0"]
    linked = HuggingFaceSource(session).dataset("derm/blood-smear-brightfield")
    assert linked.related == ["paperswithcode:blood-cell-smears"] and linked.license_raw == ["cc0-1.0"]


def test_not_an_array_is_a_clear_error(loopback, monkeypatch, session):
    loopback.add("GET", "/api/datasets", Reply(200, {"error": "Invalid filter"}))
    monkeypatch.setenv("HF_ENDPOINT", loopback.url)
    with pytest.raises(SourceResponseError, match="not a JSON array"):
        list(HuggingFaceSource(session).search({"search": "x"}, 1))


def test_link_header_parsing():
    assert next_link('<http://127.0.0.1:9/api/datasets?search=x&cursor=abc>; rel="next"') == \
        "http://127.0.0.1:9/api/datasets?search=x&cursor=abc"
    assert next_link(None) is None and next_link('<http://h/p>; rel="prev"') is None


def test_a_429_with_the_hub_ratelimit_header_waits_as_asked(loopback, monkeypatch, session):
    page = [{"id": "a/b", "tags": ["modality:image", "license:mit"], "cardData": {"license": "mit"}, "unknown": 1}]
    loopback.add("GET", "/api/datasets", [Reply(429, {"error": "rate limited"}, {"RateLimit": '"api";r=0;t=1',
                                                                           "RateLimit-Policy": '"fixed window";"api";q=500;w=300'}),
                                          Reply(200, page)])
    monkeypatch.setenv("HF_ENDPOINT", loopback.url)
    pages = list(HuggingFaceSource(session).search({"search": "b"}, 2))
    assert [c.license_raw for c in pages[0].candidates] == [["mit", "mit"]] and 1.0 in session.sleeps
