"""Kaggle datasets over kagglesdk's wire protocol at MMBU_KAGGLE_URL, with Basic auth from the environment."""
from __future__ import annotations

import base64
import json
import zipfile

from support.fetch_hosts import make_zip
from support.loopback import Reply, file_with_range

from mmbu.build.fetch import fetch_dataset

ROUTE = "/v1/datasets.DatasetApiService/DownloadDataset"
SCAN = bytes(range(256)) * 800  # 200 KiB stored, so the cut lands mid-file
ARCHIVE = make_zip({"chest_xray/train/NORMAL/a.jpeg": b"jpeg a", "chest_xray/train/PNEUMONIA/b.jpeg": SCAN},
                   compression=zipfile.ZIP_STORED)


def serve_kaggle(server) -> None:
    # DownloadDataset answers with a redirect to the storage URL of the zip (kagglesdk's HttpRedirect).
    server.add("POST", ROUTE, Reply(302, b"", {"Location": f"{server.url}/storage/chest-xray.zip"}))
    server.add("GET", "/storage/chest-xray.zip", file_with_range(ARCHIVE, etag='"k1"', cut_first_at=150_000))


def test_dataset_download_with_basic_auth_and_resume(loopback, monkeypatch, write_manifest, data_dir, session,
                                                     lock):
    monkeypatch.setenv("MMBU_KAGGLE_URL", loopback.url)
    monkeypatch.setenv("KAGGLE_USERNAME", "someuser")
    monkeypatch.setenv("KAGGLE_KEY", "0123456789abcdef")
    serve_kaggle(loopback)
    manifest = write_manifest("kag", {"kind": "kaggle", "dataset": "someuser/chest-xray", "version": 2})
    result = fetch_dataset(manifest, data_dir, session=session, lock=lock)

    assert result.status == "fetched", result.error
    assert [f.name for f in result.files] == ["chest-xray.zip"]
    raw = data_dir / "raw" / "kag"
    assert (raw / "chest_xray/train/NORMAL/a.jpeg").read_bytes() == b"jpeg a"
    assert (raw / "chest_xray/train/PNEUMONIA/b.jpeg").read_bytes() == SCAN
    posts = loopback.requests_to(ROUTE)
    assert posts[0].json() == {"ownerSlug": "someuser", "datasetSlug": "chest-xray", "datasetVersionNumber": 2}
    expected = "Basic " + base64.b64encode(b"someuser:0123456789abcdef").decode()
    assert all(p.headers["authorization"] == expected for p in posts)
    # Resumed after the cut: the POST is repeated with a Range header, which follows the redirect.
    gets = loopback.requests_to("/storage/chest-xray.zip")
    assert len(posts) == 2 and "range" not in gets[0].headers
    assert posts[1].headers["range"] == gets[1].headers["range"] != "bytes=0-"
    assert "0123456789abcdef" not in json.dumps(result.model_dump())
    assert "0123456789abcdef" not in lock.path.read_text()


def test_credentials_from_kaggle_json(loopback, monkeypatch, tmp_path, write_manifest, data_dir, session):
    monkeypatch.setenv("MMBU_KAGGLE_URL", loopback.url)
    monkeypatch.setenv("KAGGLE_CONFIG_DIR", str(tmp_path / "kcfg"))
    (tmp_path / "kcfg").mkdir()
    (tmp_path / "kcfg" / "kaggle.json").write_text('{"username": "fileuser", "key": "filekey"}')
    serve_kaggle(loopback)
    manifest = write_manifest("kagjson", {"kind": "kaggle", "dataset": "someuser/chest-xray", "version": 2})
    assert fetch_dataset(manifest, data_dir, session=session).status == "fetched"
    assert loopback.requests_to(ROUTE)[0].headers["authorization"] == \
        "Basic " + base64.b64encode(b"fileuser:filekey").decode()


def test_missing_credentials_is_one_clear_error(loopback, monkeypatch, tmp_path, write_manifest, data_dir, session):
    monkeypatch.setenv("MMBU_KAGGLE_URL", loopback.url)
    monkeypatch.setenv("KAGGLE_CONFIG_DIR", str(tmp_path / "empty"))
    manifest = write_manifest("kagnone", {"kind": "kaggle", "dataset": "someuser/chest-xray", "version": 2})
    result = fetch_dataset(manifest, data_dir, session=session)
    assert result.status == "error" and "KAGGLE_USERNAME" in result.error
    assert loopback.requests == []


def test_kaggle_401_is_reported_without_the_key(loopback, monkeypatch, write_manifest, data_dir, session):
    monkeypatch.setenv("MMBU_KAGGLE_URL", loopback.url)
    monkeypatch.setenv("KAGGLE_USERNAME", "someuser")
    monkeypatch.setenv("KAGGLE_KEY", "secretkey123")
    loopback.add("POST", ROUTE, Reply(401, {"code": 401, "message": "Unauthenticated: key secretkey123"}))
    manifest = write_manifest("kag401", {"kind": "kaggle", "dataset": "someuser/chest-xray", "version": 2})
    result = fetch_dataset(manifest, data_dir, session=session)
    assert result.status == "error" and "HTTP 401" in result.error and "secretkey123" not in result.error
