"""The completion record's fast reader gives exactly what the models give, or refuses what they refuse."""
from __future__ import annotations

import json

import pytest

from mmbu.build.fetch.model import CompletionRecord, FetchedFile, StoredFile, parse_completion


def _record(stored: list) -> dict:
    fetched = FetchedFile(name="a.zip", size=3, sha256="0" * 64, origin="local")
    return {"dataset_id": "d", "source": {"kind": "local", "path": "src"}, "licence": "CC-BY-4.0",
            "fetched_from": "local", "fetched_at": "2026-12-02T00:00:00Z", "toolkit_version": "1",
            "files": [fetched.model_dump()], "stored": stored, "resolved": {}}


def _by_the_models(text: bytes):
    record = CompletionRecord.model_validate_json(text)
    return record.model_copy(update={"stored": []}), tuple((s.path, s.size) for s in record.stored)


WRITTEN = [  # as the fetch writes them: ASCII, other UTF-8 and a name that was not UTF-8 (escaped)
    StoredFile(path="bas/img000004.png", size=8171), StoredFile(path="细胞/图像 1.png", size=12),
    StoredFile(path="x/\udcff.png", size=0)]


def test_records_as_the_fetch_writes_them_read_as_the_models_read_them():
    stored = [entry.model_dump() for entry in WRITTEN]
    assert stored[2]["path"] == "x/\\xff.png"
    text = json.dumps(_record(stored)).encode()
    record, pairs = parse_completion(text)
    assert (record, pairs) == _by_the_models(text)
    assert pairs == (("bas/img000004.png", 8171), ("细胞/图像 1.png", 12), ("x/\\xff.png", 0))
    assert record.stored == [] and record.files[0].name == "a.zip"


@pytest.mark.parametrize("stored", [
    [{"path": "a.png", "size": "12"}],  # a number as text: the models' lax reading
    [{"path": "a.png", "size": 12.0}],
    [{"size": 12, "path": "a.png"}],  # keys in another order
], ids=["size-as-text", "size-as-float", "key-order"])
def test_what_the_plain_check_does_not_take_goes_through_the_models(stored):
    text = json.dumps(_record(stored)).encode()
    assert parse_completion(text) == _by_the_models(text)


@pytest.mark.parametrize("stored", [
    [{"path": "a.png", "size": 1, "sha256": "x"}],  # a key StoredFile forbids
    [{"path": "a.png"}],
    [["a.png", 1]],
    {"a.png": 1},
    [{"path": 3, "size": 1}],
    [{"path": "\ud800.png", "size": 1}],  # a lone surrogate escape: invalid JSON text to orjson and to pydantic
], ids=["extra-key", "no-size", "list-entry", "not-a-list", "path-not-text", "lone-surrogate"])
def test_an_invalid_stored_list_is_refused_as_the_models_refuse_it(stored):
    text = json.dumps(_record(stored)).encode()
    with pytest.raises(ValueError):
        _by_the_models(text)
    with pytest.raises(ValueError):
        parse_completion(text)


def test_an_invalid_record_is_refused_even_with_a_plain_stored_list():
    document = _record([{"path": "a.png", "size": 1}])
    document["fetched_from"] = "ftp"
    with pytest.raises(ValueError):
        parse_completion(json.dumps(document).encode())
    with pytest.raises(ValueError):
        parse_completion(b"{not json")
