"""Hugging Face dataset repos at a pinned revision, with the endpoint taken from HF_ENDPOINT."""
from __future__ import annotations

from support.fetch_hosts import serve_hf_dataset, sha256
from support.loopback import Reply

from mmbu.build.fetch import fetch_dataset

REVISION = "0123456789abcdef0123456789abcdef01234567"
FILES = {"README.md": b"---\nlicense: cc-by-4.0\n---\n", "data/train/monocyte/1.png": b"png one",
         "data/train/lymphocyte/2.png": b"png two", "data/meta.parquet": b"PAR1fake"}


def test_snapshot_at_the_pinned_revision_with_patterns(loopback, monkeypatch, write_manifest, data_dir, lock):
    monkeypatch.setenv("HF_ENDPOINT", loopback.url)
    serve_hf_dataset(loopback, "someorg/cells", REVISION, FILES)
    manifest = write_manifest("hf_cells", {"kind": "huggingface", "repo": "someorg/cells", "revision": REVISION,
                                           "patterns": ["data/train/*"]})
    result = fetch_dataset(manifest, data_dir, lock=lock)
    assert result.status == "fetched", result.error
    raw = data_dir / "raw" / "hf_cells"
    assert (raw / "data/train/monocyte/1.png").read_bytes() == b"png one"
    assert (raw / "data/train/lymphocyte/2.png").read_bytes() == b"png two"
    assert not (raw / "README.md").exists() and not (raw / "data/meta.parquet").exists()
    assert not any(p.is_symlink() for p in raw.rglob("*"))
    resolved = [r.path for r in loopback.requests if "/resolve/" in r.path]
    assert resolved and all(f"/resolve/{REVISION}/" in p for p in resolved)
    assert any("mmbu/" in r.headers.get("user-agent", "") for r in loopback.requests)
    pins = lock.pins_for("hf_cells", manifest.source.model_dump(mode="json", exclude_none=True))
    assert pins["data/train/monocyte/1.png"].sha256 == sha256(b"png one")


def test_unknown_repo_is_one_readable_error(loopback, monkeypatch, write_manifest, data_dir):
    monkeypatch.setenv("HF_ENDPOINT", loopback.url)
    loopback.add("GET", "^/api/datasets/someorg/missing/", Reply(
        404, {"error": "Repository not found"}, {"X-Error-Code": "RepoNotFound",
                                                 "X-Error-Message": "Repository not found"}))
    manifest = write_manifest("hf_missing", {"kind": "huggingface", "repo": "someorg/missing", "revision": REVISION})
    result = fetch_dataset(manifest, data_dir)
    assert result.status == "error" and "someorg/missing@0123456789ab" in result.error
    assert "\n" not in result.error and ("404" in result.error or "not found" in result.error.lower())
    assert not (data_dir / "raw" / "hf_missing").exists()
