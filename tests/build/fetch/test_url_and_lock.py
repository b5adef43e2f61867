"""Plain URLs (Range resume after a cut, 404, manifest checksums) and the sha256 lock / no-op refetch."""
from __future__ import annotations

import json
import os

import yaml
from support.fetch_hosts import make_zip, sha256
from support.loopback import Reply, file_with_range

from mmbu.build.fetch import LockFile, fetch_dataset
from mmbu.build.fetch.download import DownloadRequest, download

PAYLOAD = bytes(range(256)) * 1200  # 300 KiB, several 64 KiB chunks


def url_source(server, *names: str, **extra) -> dict:
    return {"kind": "url", "files": [{"url": f"{server.url}/files/{name}", **extra} for name in names]}


def test_download_resumes_with_range_after_a_connection_cut(loopback, write_manifest, data_dir, session, lock):
    loopback.add("GET", "/files/scan.bin", file_with_range(PAYLOAD, etag='"v1"', cut_first_at=150_000))
    result = fetch_dataset(write_manifest("cut", url_source(loopback, "scan.bin")), data_dir, session=session,
                           lock=lock)
    assert result.status == "fetched", result.error
    assert (data_dir / "raw" / "cut" / "scan.bin").read_bytes() == PAYLOAD
    first, second = loopback.requests_to("/files/scan.bin")
    assert "range" not in first.headers and first.headers["accept-encoding"] == "identity"
    offset = int(second.headers["range"].removeprefix("bytes=").rstrip("-"))
    assert 0 < offset <= 150_000 and second.headers["if-range"] == '"v1"'


def test_partial_file_from_an_earlier_run_is_resumed_only_if_the_etag_matches(loopback, tmp_path, session):
    loopback.add("GET", "/files/a.bin", file_with_range(PAYLOAD, etag='"v2"'))
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    # An earlier run left 1000 bytes of an *older* version (etag v1): they must not be spliced in.
    (downloads / "a.bin.part").write_bytes(b"\0" * 1000)
    (downloads / "a.bin.part.json").write_text(json.dumps({"etag": '"v1"', "size": len(PAYLOAD)}))
    download(session, DownloadRequest(url=f"{loopback.url}/files/a.bin", name="a.bin"), tmp_path / "a.bin", downloads)
    assert (tmp_path / "a.bin").read_bytes() == PAYLOAD
    # Same version left behind: resumed from byte 1000.
    (downloads / "a.bin.part").write_bytes(PAYLOAD[:1000])
    (downloads / "a.bin.part.json").write_text(json.dumps({"etag": '"v2"', "size": len(PAYLOAD)}))
    download(session, DownloadRequest(url=f"{loopback.url}/files/a.bin", name="a.bin"), tmp_path / "b.bin", downloads)
    assert (tmp_path / "b.bin").read_bytes() == PAYLOAD
    assert loopback.requests_to("/files/a.bin")[-1].headers["range"] == "bytes=1000-"


def test_404_names_the_dataset_file(loopback, write_manifest, data_dir, session):
    result = fetch_dataset(write_manifest("missing", url_source(loopback, "nope.zip")), data_dir, session=session)
    assert result.status == "error" and "HTTP 404" in result.error and "/files/nope.zip" in result.error
    assert not (data_dir / "raw" / "missing").exists()


def test_manifest_sha256_mismatch_removes_the_file(loopback, write_manifest, data_dir, session):
    loopback.add("GET", "/files/a.bin", file_with_range(PAYLOAD))
    manifest = write_manifest("wrongsum", url_source(loopback, "a.bin", sha256="f" * 64))
    result = fetch_dataset(manifest, data_dir, session=session)
    assert result.status == "error" and "sha256 checksum mismatch" in result.error
    assert not list(data_dir.rglob("a.bin*"))


def test_lock_pins_on_first_fetch_and_rejects_changed_content(loopback, write_manifest, data_dir, session, lock):
    loopback.add("GET", "/files/a.bin", file_with_range(PAYLOAD))
    manifest = write_manifest("pinned", url_source(loopback, "a.bin"))
    first = fetch_dataset(manifest, data_dir, session=session, lock=lock)
    assert first.status == "fetched" and first.pinned == ["a.bin"]
    on_disk = yaml.safe_load(lock.path.read_text())
    assert on_disk["datasets"]["pinned"]["files"]["a.bin"] == {"sha256": sha256(PAYLOAD), "size": len(PAYLOAD)}

    # The host now serves different bytes under the same URL; the raw folder is gone (e.g. a new machine).
    loopback.add("GET", "/files/a.bin", file_with_range(PAYLOAD[::-1]))
    os.rename(data_dir / "raw" / "pinned", data_dir / "old")
    second = fetch_dataset(manifest, data_dir, session=session, lock=LockFile(lock.path))
    assert second.status == "error" and "sha256 checksum mismatch" in second.error and "removed" in second.error
    assert not (data_dir / "raw" / "pinned").exists() and not list(data_dir.rglob("*.part"))


def test_second_fetch_of_a_complete_dataset_sends_no_request(loopback, write_manifest, data_dir, session, lock):
    loopback.add("GET", "/files/images.zip", file_with_range(make_zip({"a/1.png": b"one", "b/2.png": b"two"})))
    manifest = write_manifest("twice", url_source(loopback, "images.zip"))
    assert fetch_dataset(manifest, data_dir, session=session, lock=lock).status == "fetched"
    seen = len(loopback.requests)
    again = fetch_dataset(manifest, data_dir, session=session, lock=lock)
    assert again.status == "up_to_date" and len(loopback.requests) == seen
    assert [f.name for f in again.files] == ["images.zip"]

    # Losing the lock entry does not force a download: the completion record restores the pins.
    lock.path.unlink()
    fresh = LockFile(lock.path)
    assert fetch_dataset(manifest, data_dir, session=session, lock=fresh).status == "up_to_date"
    assert "images.zip" in yaml.safe_load(lock.path.read_text())["datasets"]["twice"]["files"]
    assert len(loopback.requests) == seen

    # A damaged raw folder is fetched again.
    (data_dir / "raw" / "twice" / "a" / "1.png").unlink()
    assert fetch_dataset(manifest, data_dir, session=session, lock=fresh).status == "fetched"
    assert (data_dir / "raw" / "twice" / "a" / "1.png").read_bytes() == b"one"


def test_a_fetch_that_pins_what_the_lock_already_holds_leaves_the_file_alone(loopback, write_manifest, data_dir,
                                                                            session, lock):
    """The lock usually lives in the repository: a fetch into a new data folder that finds the same pins does not
    rewrite it (no churn, and no temporary beside it for a kill to leave)."""
    loopback.add("GET", "/files/a.bin", file_with_range(PAYLOAD))
    manifest = write_manifest("same", url_source(loopback, "a.bin"))
    assert fetch_dataset(manifest, data_dir, session=session, lock=lock).status == "fetched"
    written = lock.path.stat().st_mtime_ns, lock.path.read_bytes()
    os.utime(lock.path, ns=(written[0] - 10**9, written[0] - 10**9))  # a second back: a rewrite would move it
    before = lock.path.stat().st_mtime_ns
    again = fetch_dataset(manifest, data_dir.parent / "other-data", session=session, lock=LockFile(lock.path))
    assert again.status == "fetched" and again.pinned == []
    assert lock.path.stat().st_mtime_ns == before and lock.path.read_bytes() == written[1]


def test_changed_source_refetches_and_repins(loopback, write_manifest, data_dir, session, lock):
    loopback.add("GET", "/files/v1.bin", Reply(200, b"version one"))
    loopback.add("GET", "/files/v2.bin", Reply(200, b"version two"))
    assert fetch_dataset(write_manifest("moving", url_source(loopback, "v1.bin")), data_dir, session=session,
                         lock=lock).status == "fetched"
    result = fetch_dataset(write_manifest("moving", url_source(loopback, "v2.bin")), data_dir, session=session,
                           lock=lock)
    assert result.status == "fetched" and result.pinned == ["v2.bin"]
    raw = data_dir / "raw" / "moving"
    assert (raw / "v2.bin").read_bytes() == b"version two" and not (raw / "v1.bin").exists()
    assert list(yaml.safe_load(lock.path.read_text())["datasets"]["moving"]["files"]) == ["v2.bin"]


def test_local_source_relative_to_the_repository(tmp_path, write_manifest, data_dir, lock):
    repo = tmp_path / "repo"
    (repo / "samples" / "cls").mkdir(parents=True)
    (repo / "samples" / "cls" / "x.png").write_bytes(b"png")
    (repo / "samples" / "notes.txt").write_text("skip me")
    manifest = write_manifest("local", {"kind": "local", "path": "samples", "patterns": ["*.png"]})
    result = fetch_dataset(manifest, data_dir, repo_root=repo, lock=lock)
    assert result.status == "fetched" and [f.name for f in result.files] == ["cls/x.png"]
    assert (data_dir / "raw" / "local" / "cls" / "x.png").read_bytes() == b"png"
    missing = write_manifest("nolocal", {"kind": "local", "path": "nowhere"})
    failed = fetch_dataset(missing, data_dir, repo_root=repo)
    assert failed.status == "error" and "nowhere does not exist" in failed.error


def test_raw_folder_and_record_are_readable_like_ordinary_files(tmp_path, write_manifest, data_dir, lock):
    (tmp_path / "repo" / "s").mkdir(parents=True)
    (tmp_path / "repo" / "s" / "x.bin").write_bytes(b"x")
    manifest = write_manifest("modes", {"kind": "local", "path": "s"})
    assert fetch_dataset(manifest, data_dir, repo_root=tmp_path / "repo", lock=lock).status == "fetched"
    mask = os.umask(0)
    os.umask(mask)
    assert (data_dir / "raw" / "modes").stat().st_mode & 0o777 == 0o777 & ~mask
    assert (data_dir / "raw" / "modes" / ".mmbu-fetch.json").stat().st_mode & 0o777 == 0o666 & ~mask
    assert lock.path.stat().st_mode & 0o777 == 0o666 & ~mask
