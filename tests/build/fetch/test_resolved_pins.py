"""A manifest that leaves out what no source states (HF revision, Kaggle version) is pinned on first fetch.

The first fetch resolves the default branch's commit / the current version on the (loopback) host, records it
under `resolved` in manifests.lock, and every later fetch uses the recorded value even after the host moved on.
"""
from __future__ import annotations

import shutil

import yaml

from support.fetch_hosts import make_zip, serve_hf_dataset
from support.loopback import Reply, file_with_range

from mmbu.build.fetch import LockFile, fetch_dataset

FIRST = "1111111111111111111111111111111111111111"
LATER = "2222222222222222222222222222222222222222"
GET_DATASET = "/v1/datasets.DatasetApiService/GetDataset"
DOWNLOAD = "/v1/datasets.DatasetApiService/DownloadDataset"


def serve_hf_head(server, repo: str, sha: str) -> None:
    """`GET /api/datasets/<repo>` (no revision): the repo info huggingface_hub's dataset_info reads `sha` from."""
    server.add("GET", f"/api/datasets/{repo}", Reply(200, {"id": repo, "sha": sha, "private": False}))


def test_huggingface_revision_is_resolved_once_then_enforced(loopback, monkeypatch, write_manifest, data_dir, lock):
    monkeypatch.setenv("HF_ENDPOINT", loopback.url)
    serve_hf_dataset(loopback, "someorg/cells", FIRST, {"data/a.png": b"first a"})
    serve_hf_head(loopback, "someorg/cells", FIRST)
    manifest = write_manifest("hf_unpinned", {"kind": "huggingface", "repo": "someorg/cells"})
    assert manifest.source.revision is None

    first = fetch_dataset(manifest, data_dir, lock=lock)
    assert first.status == "fetched", first.error
    assert first.resolved == {"revision": FIRST}
    identity = manifest.source.model_dump(mode="json", exclude_none=True)
    assert LockFile(lock.path).resolved_for("hf_unpinned", identity) == {"revision": FIRST}
    written = yaml.safe_load(lock.path.read_text())["datasets"]["hf_unpinned"]
    assert written["resolved"] == {"revision": FIRST} and written["files"]["data/a.png"]["size"] == len(b"first a")

    # The branch moves on; the raw folder is lost. The next fetch must not ask for the branch head again.
    serve_hf_dataset(loopback, "someorg/cells", LATER, {"data/a.png": b"later a"})
    serve_hf_head(loopback, "someorg/cells", LATER)
    shutil.rmtree(data_dir / "raw" / "hf_unpinned")
    loopback.requests.clear()
    again = fetch_dataset(manifest, data_dir, lock=LockFile(lock.path))
    assert again.status == "fetched", again.error
    assert (data_dir / "raw" / "hf_unpinned" / "data/a.png").read_bytes() == b"first a"
    assert not loopback.requests_to("/api/datasets/someorg/cells")
    resolved = [r.path for r in loopback.requests if "/resolve/" in r.path]
    assert resolved and all(f"/resolve/{FIRST}/" in path for path in resolved)

    # Complete and pinned: a third fetch is a no-op without any request.
    loopback.requests.clear()
    assert fetch_dataset(manifest, data_dir, lock=LockFile(lock.path)).status == "up_to_date"
    assert loopback.requests == []


def test_a_stated_revision_is_used_as_is_and_not_recorded_as_resolved(loopback, monkeypatch, write_manifest,
                                                                       data_dir, lock):
    monkeypatch.setenv("HF_ENDPOINT", loopback.url)
    serve_hf_dataset(loopback, "someorg/cells", FIRST, {"data/a.png": b"first a"})
    manifest = write_manifest("hf_pinned", {"kind": "huggingface", "repo": "someorg/cells", "revision": FIRST})
    result = fetch_dataset(manifest, data_dir, lock=lock)
    assert result.status == "fetched", result.error
    assert result.resolved == {}
    assert not loopback.requests_to("/api/datasets/someorg/cells")
    assert "resolved" not in lock.path.read_text()


def kaggle_env(monkeypatch, loopback) -> None:
    monkeypatch.setenv("MMBU_KAGGLE_URL", loopback.url)
    monkeypatch.setenv("KAGGLE_USERNAME", "someuser")
    monkeypatch.setenv("KAGGLE_KEY", "0123456789abcdef")


def serve_kaggle_versions(server, current: int, archives: dict[int, bytes]) -> None:
    server.add("POST", GET_DATASET, Reply(200, {"ownerSlug": "someuser", "datasetSlug": "knee",
                                                "currentVersionNumber": current}))

    def download(request):
        version = request.json()["datasetVersionNumber"]
        return Reply(302, b"", {"Location": f"{server.url}/storage/v{version}.zip"})

    server.add("POST", DOWNLOAD, download)
    for version, archive in archives.items():
        server.add("GET", f"/storage/v{version}.zip", file_with_range(archive))


def test_kaggle_version_is_resolved_once_then_enforced(loopback, monkeypatch, write_manifest, data_dir, session,
                                                       lock):
    kaggle_env(monkeypatch, loopback)
    archives = {3: make_zip({"train/0/a.png": b"version three"}), 4: make_zip({"train/0/a.png": b"version four"})}
    serve_kaggle_versions(loopback, 3, archives)
    manifest = write_manifest("kag_unpinned", {"kind": "kaggle", "dataset": "someuser/knee"})

    first = fetch_dataset(manifest, data_dir, session=session, lock=lock)
    assert first.status == "fetched", first.error
    assert first.resolved == {"version": 3}
    assert loopback.requests_to(GET_DATASET)[0].json() == {"ownerSlug": "someuser", "datasetSlug": "knee"}
    assert loopback.requests_to(DOWNLOAD)[0].json()["datasetVersionNumber"] == 3
    assert (data_dir / "raw" / "kag_unpinned" / "train/0/a.png").read_bytes() == b"version three"

    serve_kaggle_versions(loopback, 4, archives)  # a new version appears on Kaggle
    shutil.rmtree(data_dir / "raw" / "kag_unpinned")
    loopback.requests.clear()
    again = fetch_dataset(manifest, data_dir, session=session, lock=LockFile(lock.path))
    assert again.status == "fetched", again.error
    assert not loopback.requests_to(GET_DATASET)
    assert [r.json()["datasetVersionNumber"] for r in loopback.requests_to(DOWNLOAD)] == [3]
    assert (data_dir / "raw" / "kag_unpinned" / "train/0/a.png").read_bytes() == b"version three"


def test_kaggle_without_a_current_version_is_one_clear_error(loopback, monkeypatch, write_manifest, data_dir,
                                                             session, lock):
    kaggle_env(monkeypatch, loopback)
    loopback.add("POST", GET_DATASET, Reply(200, {"ownerSlug": "someuser", "datasetSlug": "knee"}))
    manifest = write_manifest("kag_noversion", {"kind": "kaggle", "dataset": "someuser/knee"})
    result = fetch_dataset(manifest, data_dir, session=session, lock=lock)
    assert result.status == "error"
    assert "currentVersionNumber" in result.error and "write `version:`" in result.error
    assert not loopback.requests_to(DOWNLOAD) and not (data_dir / "raw" / "kag_noversion").exists()
