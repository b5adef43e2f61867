"""Zenodo version records through MMBU_ZENODO_URL: md5, licence re-check, extraction, failures."""
from __future__ import annotations

import json
import time

import pytest
import yaml
from support.fetch_hosts import make_zip, md5, serve_zenodo_record, sha256
from support.loopback import Reply

from mmbu.build.fetch import COMPLETION_RECORD, fetch_dataset
from mmbu.core.licences import LICENCE_TABLES_PATH
from mmbu.curation.agent.screening import screen_license
from mmbu.curation.sources.zenodo import candidate_from_record

IMAGES = make_zip({"monocyte/cell_001.png": b"\x89PNG fake 1", "lymphocyte/cell_002.png": b"\x89PNG fake 2"})
LABELS = b"file,label\ncell_001.png,monocyte\n"


def test_record_files_are_verified_extracted_and_pinned(loopback, monkeypatch, write_manifest, data_dir, lock,
                                                         session):
    monkeypatch.setenv("MMBU_ZENODO_URL", loopback.url)
    serve_zenodo_record(loopback, 11012345, {"images.zip": IMAGES, "labels.csv": LABELS})
    manifest = write_manifest("marrow", {"kind": "zenodo", "record": 11012345})

    result = fetch_dataset(manifest, data_dir, lock=lock, session=session)

    assert result.status == "fetched", result.error
    raw = data_dir / "raw" / "marrow"
    assert (raw / "monocyte" / "cell_001.png").read_bytes() == b"\x89PNG fake 1"
    assert (raw / "lymphocyte" / "cell_002.png").read_bytes() == b"\x89PNG fake 2"
    assert (raw / "labels.csv").read_bytes() == LABELS
    assert not (raw / "images.zip").exists()  # extracted archives are not kept
    record = json.loads((raw / COMPLETION_RECORD).read_text())
    assert {f["name"]: f["md5"] for f in record["files"]} == {"images.zip": md5(IMAGES), "labels.csv": md5(LABELS)}
    assert sorted(s["path"] for s in record["stored"]) == [
        "labels.csv", "lymphocyte/cell_002.png", "monocyte/cell_001.png"]
    pins = lock.pins_for("marrow", {"kind": "zenodo", "record": 11012345})
    assert {name: pin.sha256 for name, pin in pins.items()} == {"images.zip": sha256(IMAGES),
                                                                "labels.csv": sha256(LABELS)}
    assert all(r.headers["user-agent"].startswith("mmbu/") for r in loopback.requests)
    assert not list(data_dir.glob("raw/.*staging*")) and not (data_dir / "downloads" / "marrow").exists()


def test_only_the_listed_files_are_fetched(loopback, monkeypatch, write_manifest, data_dir, session):
    monkeypatch.setenv("MMBU_ZENODO_URL", loopback.url)
    serve_zenodo_record(loopback, 7, {"images.zip": IMAGES, "labels.csv": LABELS})
    manifest = write_manifest("subset", {"kind": "zenodo", "record": 7, "files": ["labels.csv"]})
    assert fetch_dataset(manifest, data_dir, session=session).status == "fetched"
    assert not loopback.requests_to("/api/records/7/files/images.zip/content")
    assert (data_dir / "raw" / "subset" / "labels.csv").exists()


def test_md5_mismatch_fails_and_leaves_nothing(loopback, monkeypatch, write_manifest, data_dir, session):
    monkeypatch.setenv("MMBU_ZENODO_URL", loopback.url)
    serve_zenodo_record(loopback, 8, {"labels.csv": LABELS}, checksums={"labels.csv": "0" * 32})
    result = fetch_dataset(write_manifest("bad_md5", {"kind": "zenodo", "record": 8}), data_dir, session=session)
    assert result.status == "error"
    assert "labels.csv" in result.error and "md5 checksum mismatch" in result.error and "removed" in result.error
    assert not (data_dir / "raw" / "bad_md5").exists()
    assert not list((data_dir / "downloads").rglob("*.part"))


def test_truncated_download_is_an_error(loopback, monkeypatch, write_manifest, data_dir, session):
    monkeypatch.setenv("MMBU_ZENODO_URL", loopback.url)
    serve_zenodo_record(loopback, 9, {"labels.csv": LABELS}, sizes={"labels.csv": len(LABELS) + 100})
    result = fetch_dataset(write_manifest("short", {"kind": "zenodo", "record": 9}), data_dir, session=session)
    assert result.status == "error" and "truncated" in result.error
    assert f"got {len(LABELS)} bytes, expected {len(LABELS) + 100}" in result.error
    assert not (data_dir / "raw" / "short").exists()


def test_licence_change_is_detected_before_any_download(loopback, monkeypatch, write_manifest, data_dir, session):
    monkeypatch.setenv("MMBU_ZENODO_URL", loopback.url)
    serve_zenodo_record(loopback, 10, {"labels.csv": LABELS}, licence="cc-by-nc-4.0")
    result = fetch_dataset(write_manifest("relicensed", {"kind": "zenodo", "record": 10}), data_dir, session=session)
    assert result.status == "error" and "licence changed" in result.error
    assert "cc-by-nc-4.0" in result.error and "CC-BY-4.0" in result.error
    assert [r.path for r in loopback.requests] == ["/api/records/10"]


def test_licence_removed_is_a_change(loopback, monkeypatch, write_manifest, data_dir, session):
    monkeypatch.setenv("MMBU_ZENODO_URL", loopback.url)
    serve_zenodo_record(loopback, 12, {"labels.csv": LABELS}, licence=None)
    result = fetch_dataset(write_manifest("unlicensed", {"kind": "zenodo", "record": 12}), data_dir, session=session)
    assert result.status == "error" and "no longer states a licence" in result.error


def test_zenodo_legacy_licence_ids_are_normalised(loopback, monkeypatch, write_manifest, data_dir, session):
    monkeypatch.setenv("MMBU_ZENODO_URL", loopback.url)
    serve_zenodo_record(loopback, 11, {"labels.csv": LABELS}, licence="cc-zero")
    manifest = write_manifest("public_domain", {"kind": "zenodo", "record": 11}, licence="CC0-1.0")
    assert fetch_dataset(manifest, data_dir, session=session).status == "fetched"


def test_missing_record_gives_a_404_message(loopback, monkeypatch, write_manifest, data_dir, session):
    monkeypatch.setenv("MMBU_ZENODO_URL", loopback.url)
    result = fetch_dataset(write_manifest("gone", {"kind": "zenodo", "record": 404404}), data_dir, session=session)
    assert result.status == "error" and "HTTP 404" in result.error and "/api/records/404404" in result.error


def test_missing_file_key_is_named(loopback, monkeypatch, write_manifest, data_dir, session):
    monkeypatch.setenv("MMBU_ZENODO_URL", loopback.url)
    serve_zenodo_record(loopback, 13, {"labels.csv": LABELS})
    manifest = write_manifest("nokey", {"kind": "zenodo", "record": 13, "files": ["masks.zip"]})
    result = fetch_dataset(manifest, data_dir, session=session)
    assert result.status == "error" and "no file(s) masks.zip" in result.error and "labels.csv" in result.error


def test_429_with_retry_after_is_honoured(loopback, monkeypatch, write_manifest, data_dir, session):
    monkeypatch.setenv("MMBU_ZENODO_URL", loopback.url)
    record = serve_zenodo_record(loopback, 14, {"labels.csv": LABELS})
    loopback.add("GET", "/api/records/14", [Reply(429, {"message": "Request error 429: 100 per 1 minute"},
                                                  {"Retry-After": "1"}), record])
    started = time.monotonic()
    result = fetch_dataset(write_manifest("busy", {"kind": "zenodo", "record": 14}), data_dir, session=session)
    assert result.status == "fetched", result.error
    assert time.monotonic() - started >= 1.0
    assert len(loopback.requests_to("/api/records/14")) == 2


def test_file_links_elsewhere_are_fetched_from_the_configured_base(loopback, monkeypatch, write_manifest, data_dir,
                                                                   session):
    monkeypatch.setenv("MMBU_ZENODO_URL", loopback.url)
    record = serve_zenodo_record(loopback, 15, {"labels.csv": LABELS})
    record.body["files"][0]["links"]["self"] = "https://zenodo.org/api/records/15/files/labels.csv/content"
    result = fetch_dataset(write_manifest("elsewhere", {"kind": "zenodo", "record": 15}), data_dir, session=session)
    assert result.status == "fetched", result.error
    assert loopback.requests_to("/api/records/15/files/labels.csv/content")


def test_leftovers_of_a_killed_run_are_cleared(loopback, monkeypatch, write_manifest, data_dir, session):
    monkeypatch.setenv("MMBU_ZENODO_URL", loopback.url)
    serve_zenodo_record(loopback, 16, {"labels.csv": LABELS})
    stale = data_dir / "raw" / ".killed.staging-abc123"
    (stale / "half").mkdir(parents=True)
    assert fetch_dataset(write_manifest("killed", {"kind": "zenodo", "record": 16}), data_dir,
                         session=session).status == "fetched"
    assert not stale.exists() and sorted(p.name for p in (data_dir / "raw").iterdir()) == ["killed"]


ZENODO_IDS = [raw for raw, spdx in yaml.safe_load(LICENCE_TABLES_PATH.read_text(encoding="utf-8"))["zenodo"].items()
              if spdx] + ["cc-by-4.0", "cc-by-nc-sa-4.0", "mit"]


@pytest.mark.parametrize("zenodo_id", ZENODO_IDS)
def test_a_licence_discovery_accepts_is_accepted_by_fetch(zenodo_id, loopback, monkeypatch, write_manifest, data_dir,
                                                          session):
    """Discovery screens the record and writes its SPDX id into the manifest; fetch re-checks the same record
    against it. Both read one table (core/licences.yaml): `cc-by-nc`/`cc-by-nd` once failed here."""
    monkeypatch.setenv("MMBU_ZENODO_URL", loopback.url)
    serve_zenodo_record(loopback, 21, {"labels.csv": LABELS}, licence=zenodo_id)
    candidate = candidate_from_record(session.get_json(f"{loopback.url}/api/records/21", use_cache=False))
    screen_license(candidate)
    assert candidate.license, candidate.flags
    manifest = write_manifest("screened", {"kind": "zenodo", "record": 21}, licence=candidate.license)
    result = fetch_dataset(manifest, data_dir, session=session)
    assert result.status == "fetched", result.error


def test_a_record_whose_licence_is_not_clear_is_refused_with_the_reason(loopback, monkeypatch, write_manifest,
                                                                         data_dir, session):
    monkeypatch.setenv("MMBU_ZENODO_URL", loopback.url)
    serve_zenodo_record(loopback, 22, {"labels.csv": LABELS}, licence="other-open")
    result = fetch_dataset(write_manifest("vague", {"kind": "zenodo", "record": 22}), data_dir, session=session)
    assert result.status == "error"
    assert "licence changed" in result.error and "'other-open' (not a clear licence)" in result.error
