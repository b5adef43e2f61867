"""A release downloaded from a loopback Hub is bounded: a body past its listed size is cut at the toolkit's margin,
a dripping body at the minimum rate, and nothing half-written stays in the cache; a normal download still verifies.
The repository is synthetic (a few small files and their SHA256SUMS), put straight into the loopback Hub."""
from __future__ import annotations

import hashlib

import pytest
from click.testing import CliRunner
from huggingface_hub import constants
from support.hub_server import LoopbackHub, Repository
from support.loopback import Reply

from mmbu.benchmark_eval.hub_download import MIN_RATE_VARIABLE, RATE_WINDOW_VARIABLE
from mmbu.benchmark_eval.release import ReleaseError
from mmbu.benchmark_eval.release_source import resolve_release
from mmbu.benchmark_eval.runner.cli import run
from mmbu.core.body_bounds import declared_size_bound

REPO = "mmbu-lab/bounded"
COMMIT = "c0ffee" * 6 + "abcd"
MIB = 1024**2
FILES = {"data/scan.bin": b"synthetic scan bytes\n" * 5, "LICENSE": b"synthetic licence\n"}


def release_files() -> dict[str, bytes]:
    sums = "".join(f"{hashlib.sha256(data).hexdigest()}  {name}\n" for name, data in sorted(FILES.items()))
    return {**FILES, "SHA256SUMS": sums.encode()}


@pytest.fixture
def hub(monkeypatch, tmp_path):
    with LoopbackHub(token="hf_" + "loopbackTokenForTests0123") as server:
        server.repos[REPO] = Repository(private=False, branches={"main": COMMIT}, commits={COMMIT: release_files()})
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
        monkeypatch.delenv("HF_TOKEN", raising=False)
        monkeypatch.setattr(constants, "HF_HUB_DISABLE_XET", True)  # see support/hub_server.py
        yield server


def endless(piece: bytes, limit: int, sent: list[int]):
    for _ in range(limit // len(piece)):
        sent.append(len(piece))
        yield piece


def leftovers(cache) -> list[str]:
    """Files a later run could take for downloaded: blobs (complete or not) and snapshot entries."""
    return sorted(p.name for p in cache.rglob("*") if p.is_file() and ("blobs" in p.parts or "snapshots" in p.parts))


def test_a_normal_download_verifies_and_is_remembered(hub, tmp_path):
    cache = tmp_path / "cache"
    resolved = resolve_release("hf://" + REPO, cache_dir=cache)
    assert resolved.commit == COMMIT and resolved.source == f"hf://{REPO}@{COMMIT}"
    assert (resolved.path / "data/scan.bin").read_bytes() == FILES["data/scan.bin"]
    assert (resolved.path.parent.parent / "mmbu-verified" / COMMIT).is_file()
    assert hub.server.requests_to(f"/api/datasets/{REPO}/tree/{COMMIT}")  # the sizes that bound each body


def test_a_body_longer_than_its_listed_size_is_cut_at_the_margin(hub, tmp_path):
    """The listing says 105 bytes; the storage the Hub redirects to sends 100 MiB (huggingface_hub's own downloader
    took it all before its size check)."""
    sent: list[int] = []
    hub.server.add("GET", f"/datasets/{REPO}/resolve/{COMMIT}/data/scan.bin",
                   Reply(302, headers={"Location": f"{hub.url}/storage/scan-object"}))
    hub.server.add("GET", "/storage/scan-object", Reply(200, chunks=endless(b"x" * 65536, 100 * MIB, sent)))
    cache = tmp_path / "cache"
    result = CliRunner().invoke(run, ["--release", f"hf://{REPO}@main", "--model", "Qwen3-VL-8B",
                                      "--base-url", "http://127.0.0.1:9/v1", "--out", str(tmp_path / "runs"),
                                      "--release-cache", str(cache)])
    bound = declared_size_bound(len(FILES["data/scan.bin"]))
    assert result.exit_code == 2, result.output
    text = " ".join(result.output.split())
    assert f"hf://{REPO}@{COMMIT[:12]}/data/scan.bin (listed at 105 bytes)" in text
    assert f"larger than the {bound:,} bytes allowed" in text and "Traceback" not in text
    assert sum(sent) < 32 * MIB  # the bound plus what the sockets buffer, not the 100 MiB sent
    assert "scan.bin" not in leftovers(cache) and not [n for n in leftovers(cache) if n.endswith(".incomplete")]
    assert not (cache / f"datasets--{REPO.replace('/', '--')}" / "mmbu-verified").exists()


@pytest.mark.timeout(60)  # unbounded, the drip below takes 300 s: fail instead
def test_a_dripping_body_is_cut_by_the_minimum_rate(hub, tmp_path, monkeypatch):
    monkeypatch.setenv(MIN_RATE_VARIABLE, "1000")  # bytes/s; the drip brings 10
    monkeypatch.setenv(RATE_WINDOW_VARIABLE, "0.5")
    sent: list[int] = []
    hub.server.add("GET", f"/datasets/{REPO}/resolve/{COMMIT}/data/scan.bin",
                   Reply(200, chunks=endless(b"0", 3000, sent), chunk_delay=0.1))
    cache = tmp_path / "cache"
    with pytest.raises(ReleaseError) as caught:
        resolve_release(f"hf://{REPO}@main", cache_dir=cache)
    message = str(caught.value)
    assert f"hf://{REPO}@{COMMIT[:12]}/data/scan.bin" in message
    assert "below the 1,000 bytes/s minimum" in message, message
    assert len(sent) < 100
    assert not [n for n in leftovers(cache) if n.endswith(".incomplete") or n == "scan.bin"]


def test_a_bad_rate_setting_is_one_sentence(hub, tmp_path, monkeypatch):
    monkeypatch.setenv(MIN_RATE_VARIABLE, "fast")
    with pytest.raises(ReleaseError, match=f"{MIN_RATE_VARIABLE}='fast' is not a number"):
        resolve_release(f"hf://{REPO}", cache_dir=tmp_path / "cache")
    monkeypatch.setenv(MIN_RATE_VARIABLE, "100")
    monkeypatch.setenv(RATE_WINDOW_VARIABLE, "0")
    with pytest.raises(ReleaseError, match=f"{RATE_WINDOW_VARIABLE}='0' must be more than 0 seconds"):
        resolve_release(f"hf://{REPO}", cache_dir=tmp_path / "cache")
