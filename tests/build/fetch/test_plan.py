"""The fetch plan against replicas of the hosts' metadata APIs on the loopback server, and against hosts that
do not answer: sizes as the hosts state them (or "unknown"), what is already there, and seconds offline."""
from __future__ import annotations

import time

from click.testing import CliRunner
from support.fetch_hosts import make_zip, serve_hf_dataset, serve_zenodo_record, sha256
from support.loopback import Reply, closed_port_url, file_with_range

from mmbu.build.fetch import fetch_dataset
from mmbu.build.fetch.lockfile import PinnedFile
from mmbu.build.fetch.plan import plan_fetch, plan_lines, probing_session
from mmbu.cli import cli

REVISION = "0123456789abcdef0123456789abcdef01234567"
KAGGLE_FILES = "/v1/datasets.DatasetApiService/ListDatasetFiles"


def paths(manifests_dir):
    return sorted(manifests_dir.glob("*.yaml"))


def test_sizes_come_from_each_hosts_metadata_api(loopback, monkeypatch, write_manifest, manifests_dir, data_dir,
                                                 session):
    monkeypatch.setenv("MMBU_ZENODO_URL", loopback.url)
    monkeypatch.setenv("HF_ENDPOINT", loopback.url)
    monkeypatch.setenv("MMBU_KAGGLE_URL", loopback.url)
    monkeypatch.setenv("KAGGLE_USERNAME", "someuser")
    monkeypatch.setenv("KAGGLE_KEY", "0123456789abcdef")
    serve_zenodo_record(loopback, 7, {"images.zip": b"z" * 5000, "labels.csv": b"x,y\n"})
    write_manifest("zen", {"kind": "zenodo", "record": 7})
    serve_hf_dataset(loopback, "org/skin", REVISION, {"data/train-0.parquet": b"p" * 300,
                                                      "data/test-0.parquet": b"q" * 200, "README.md": b"# card"})
    write_manifest("hf", {"kind": "huggingface", "repo": "org/skin", "revision": REVISION,
                          "patterns": ["data/*.parquet"]})
    pages = [Reply(200, {"datasetFiles": [{"ref": "a", "name": "a.png", "totalBytes": 1000}],
                         "nextPageToken": "page2"}),
             Reply(200, {"datasetFiles": [{"ref": "b", "name": "b.png", "totalBytes": 2500}]})]
    loopback.add("POST", KAGGLE_FILES, pages)
    write_manifest("kag", {"kind": "kaggle", "dataset": "someuser/cells", "version": 3})
    loopback.add("GET", "/files/scan.zip", file_with_range(b"s" * 4321))
    loopback.add("GET", "/plain/no-range.bin", Reply(200, b"n" * 77))
    write_manifest("web", {"kind": "url", "files": [{"url": f"{loopback.url}/files/scan.zip"},
                                                    {"url": f"{loopback.url}/plain/no-range.bin"}]})

    plan = plan_fetch(paths(manifests_dir), data_dir, session=session).by_id()

    assert {f.name: (f.size, f.basis) for f in plan["zen"].files} == {
        "images.zip": (5000, "zenodo"), "labels.csv": (4, "zenodo")}
    assert {f.name: f.size for f in plan["hf"].files} == {"data/test-0.parquet": 200, "data/train-0.parquet": 300}
    assert [(f.name, f.size, f.uncompressed) for f in plan["kag"].files] == [("cells.zip", None, 3500)]
    bodies = [r.json() for r in loopback.requests_to(KAGGLE_FILES)]
    assert bodies[0] == {"ownerSlug": "someuser", "datasetSlug": "cells", "datasetVersionNumber": 3, "pageSize": 200}
    assert bodies[1]["pageToken"] == "page2"
    assert {f.name: (f.size, f.basis) for f in plan["web"].files} == {
        "scan.zip": (4321, "content-range"), "no-range.bin": (77, "content-range")}
    assert all(p.state == "to_fetch" and not p.blocked for p in plan.values())
    assert plan["zen"].download_bytes == 5004 and plan["zen"].disk_bytes == 2 * 5000 + 4  # the zip lies beside its files
    assert plan["kag"].unknown_files == 1 and plan["kag"].disk_bytes == 2 * 3500
    # a ranged probe asks for one byte: no body of the real file crossed the wire
    assert loopback.requests_to("/files/scan.zip")[0].headers["range"] == "bytes=0-0"
    assert not (data_dir / "raw").exists()  # a plan downloads nothing


def test_what_is_already_there_costs_no_request(loopback, monkeypatch, write_manifest, manifests_dir, data_dir,
                                               session, lock, tmp_path):
    monkeypatch.setenv("MMBU_ZENODO_URL", loopback.url)
    serve_zenodo_record(loopback, 8, {"a.csv": b"1,2\n"})
    done = write_manifest("done", {"kind": "zenodo", "record": 8})
    assert fetch_dataset(done, data_dir, session=session, lock=lock).status == "fetched"
    (tmp_path / "mirror" / "mirrored" / "x").mkdir(parents=True)
    (tmp_path / "mirror" / "mirrored" / "x" / "1.png").write_bytes(b"png" * 10)
    write_manifest("mirrored", {"kind": "zenodo", "record": 999})
    (tmp_path / "repo" / "src").mkdir()
    (tmp_path / "repo" / "src" / "f.png").write_bytes(b"f" * 12)
    write_manifest("here", {"kind": "local", "path": "src"})
    seen = len(loopback.requests)

    plan = plan_fetch(paths(manifests_dir), data_dir, mirror=tmp_path / "mirror", lock=lock,
                      repo_root=tmp_path / "repo", session=session)

    assert len(loopback.requests) == seen
    states = {p.dataset_id: (p.state, [(f.name, f.size) for f in p.files]) for p in plan.datasets}
    assert states == {"done": ("fetched", [("a.csv", 4)]), "here": ("local", [("f.png", 12)]),
                      "mirrored": ("mirror", [("x/1.png", 30)])}
    text = "\n".join(plan_lines(plan))
    assert "Already fetched: 1 dataset(s), 4 bytes." in text and "To download: 0 dataset(s)" in text


def test_pins_give_sizes_and_partial_downloads_are_counted(loopback, monkeypatch, write_manifest, manifests_dir,
                                                           data_dir, session, lock):
    monkeypatch.setenv("MMBU_ZENODO_URL", loopback.url)
    serve_zenodo_record(loopback, 9, {"big.bin": b"b" * 900})
    serve_zenodo_record(loopback, 10, {"other.bin": b"o" * 50})
    first = write_manifest("first", {"kind": "zenodo", "record": 9})
    second = write_manifest("second", {"kind": "zenodo", "record": 10})
    for manifest, name, data in ((first, "big.bin", b"b" * 900), (second, "other.bin", b"o" * 50)):
        lock.record(manifest.id, {"kind": "zenodo", "record": manifest.source.record},
                    {name: PinnedFile(sha256=sha256(data), size=len(data))})
    (data_dir / "downloads" / "first").mkdir(parents=True)
    (data_dir / "downloads" / "first" / "big.bin.part").write_bytes(b"b" * 600)

    plan = plan_fetch(paths(manifests_dir), data_dir, lock=lock, session=session).by_id()

    assert [(f.size, f.basis) for f in plan["first"].files] == [(900, "manifests.lock")]
    assert plan["first"].partial_bytes == 600 and plan["first"].download_bytes == 300
    # the first pinned dataset probes the host; the second needs no request at all
    assert len(loopback.requests_to("/api/records/9")) == 1 and not loopback.requests_to("/api/records/10")
    assert "600 bytes of interrupted downloads resume" in "\n".join(plan_lines(
        plan_fetch(paths(manifests_dir), data_dir, lock=lock, session=session)))


def test_hosts_that_do_not_answer_block_their_datasets_in_seconds(loopback, monkeypatch, write_manifest,
                                                                  manifests_dir, data_dir):
    dead = closed_port_url()
    monkeypatch.setenv("MMBU_ZENODO_URL", dead)
    monkeypatch.setenv("HF_ENDPOINT", "http://hub.mmbu-test.invalid")  # .invalid never resolves (RFC 6761)
    monkeypatch.setenv("MMBU_KAGGLE_URL", loopback.url)  # this host answers: its dataset stays fetchable
    write_manifest("zen_a", {"kind": "zenodo", "record": 1})
    write_manifest("zen_b", {"kind": "zenodo", "record": 2})
    write_manifest("hf", {"kind": "huggingface", "repo": "org/x", "revision": REVISION})
    write_manifest("web", {"kind": "url", "files": [{"url": f"{dead}/f.zip"}]})
    write_manifest("kag", {"kind": "kaggle", "dataset": "o/d", "version": 1})

    started = time.monotonic()
    plan = plan_fetch(paths(manifests_dir), data_dir, session=probing_session())
    elapsed = time.monotonic() - started

    assert elapsed < 10, elapsed
    blocked = {p.dataset_id: p.error for p in plan.blocked}
    assert sorted(blocked) == ["hf", "web", "zen_a", "zen_b"]
    assert blocked["zen_b"] == f"host {dead.removeprefix('http://')} is unreachable (connection refused)"
    assert blocked["hf"] == "host hub.mmbu-test.invalid is unreachable (its name does not resolve: no network, or no DNS)"
    kaggle = plan.by_id()["kag"]  # no credentials: the host is fine, the fetch will say what is missing
    assert kaggle.state == "to_fetch" and "KAGGLE_USERNAME" in kaggle.note
    lines = plan_lines(plan)
    assert sum(line.startswith("✗ dataset ") for line in lines) == 4


def test_dry_run_prints_the_plan_and_downloads_nothing(loopback, monkeypatch, write_manifest, manifests_dir,
                                                      data_dir):
    monkeypatch.setenv("MMBU_ZENODO_URL", loopback.url)
    serve_zenodo_record(loopback, 11, {"images.zip": make_zip({"a/1.png": b"one"})})
    write_manifest("zen", {"kind": "zenodo", "record": 11})
    args = ["fetch", "--manifests", str(manifests_dir), "--data", str(data_dir), "--dry-run"]

    result = CliRunner().invoke(cli, args)

    assert result.exit_code == 0, result.output
    assert "zen" in result.output and "zenodo" in result.output and "To download: 1 dataset(s) from 1 host(s)" in result.output
    assert not loopback.requests_to("/api/records/11/files/images.zip/content")
    assert not (data_dir / "raw").exists()

    monkeypatch.setenv("MMBU_ZENODO_URL", closed_port_url())
    down = CliRunner().invoke(cli, args)
    assert down.exit_code == 1 and "✗ dataset zen: host 127.0.0.1:" in down.output
    assert "Traceback" not in down.output


def test_a_build_reads_each_completion_record_once_for_its_plan_and_its_fetch(tmp_path, write_manifest,
                                                                               manifests_dir, data_dir, session, lock):
    """The plan reads every dataset's completion record before the fetch reads them again: with more datasets than
    the parse cache held (64), a 410-dataset no-op rebuild parsed each record twice."""
    from mmbu.build.fetch.fetcher import _parsed_completion

    manifests = []
    for index in range(100):
        (tmp_path / "repo" / f"src{index}").mkdir(parents=True)
        (tmp_path / "repo" / f"src{index}" / "a.png").write_bytes(b"a" * (index + 1))
        manifests.append(write_manifest(f"d{index:03d}", {"kind": "local", "path": f"src{index}"}))
    for manifest in manifests:
        assert fetch_dataset(manifest, data_dir, session=session, lock=lock,
                             repo_root=tmp_path / "repo").status == "fetched"
    _parsed_completion.cache_clear()

    plan = plan_fetch(paths(manifests_dir), data_dir, lock=lock, repo_root=tmp_path / "repo", session=session)
    assert {p.state for p in plan.datasets} == {"fetched"}
    results = [fetch_dataset(m, data_dir, session=session, lock=lock, repo_root=tmp_path / "repo") for m in manifests]
    assert {r.status for r in results} == {"up_to_date"}
    assert _parsed_completion.cache_info().misses == 100  # each record parsed once, by the plan

    (data_dir / "raw" / "d007" / "a.png").write_bytes(b"changed")  # a stored file of another size: not complete
    assert fetch_dataset(manifests[7], data_dir, session=session, lock=lock,
                         repo_root=tmp_path / "repo").status == "fetched"
