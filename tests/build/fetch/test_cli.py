"""`mmbu fetch` end to end: exit codes, per-dataset messages, the JSON-lines report, no-op reruns."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import yaml
from click.testing import CliRunner
from support.fetch_hosts import make_zip, serve_zenodo_record
from support.loopback import Reply, Request, file_with_range

from mmbu.build.fetch import fetch_dataset
from mmbu.cli import cli

FAST_POLICIES = {"*": {"requests_per_second": 1000, "burst": 100, "backoff_base": 0.01, "backoff_max": 0.02,
                       "max_attempts": 2, "read_timeout": 5}}


def policies_file(tmp_path):
    path = tmp_path / "policies.yaml"
    path.write_text(yaml.safe_dump(FAST_POLICIES))
    return path


def run_mmbu(args, env_extra):
    env = {**os.environ, **env_extra}
    return subprocess.run([sys.executable, "-m", "mmbu", *args], capture_output=True, text=True, env=env,
                          timeout=120)


def test_failures_are_reported_per_dataset_and_the_rest_still_fetch(loopback, tmp_path, write_manifest,
                                                                    manifests_dir, data_dir):
    loopback.add("GET", "/files/images.zip", file_with_range(make_zip({"a/1.png": b"one"})))
    write_manifest("good", {"kind": "url", "files": [{"url": f"{loopback.url}/files/images.zip"}]})
    write_manifest("gone", {"kind": "zenodo", "record": 404404})
    (manifests_dir / "broken.yaml").write_text("id: broken\ntitle: [unclosed\n")

    result = run_mmbu(["fetch", "--manifests", str(manifests_dir), "--data", str(data_dir),
                       "--http-policies", str(policies_file(tmp_path))], {"MMBU_ZENODO_URL": loopback.url})

    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert "dataset gone: HTTP 404" in result.stderr and "/api/records/404404" in result.stderr
    assert "dataset broken:" in result.stderr and "broken.yaml" in result.stderr
    assert "1 of 3 datasets ready" in result.stderr
    report = [json.loads(line) for line in (data_dir / "reports" / "fetch-report.jsonl").read_text().splitlines()]
    assert {r["dataset_id"]: r["status"] for r in report} == {"broken": "error", "gone": "error", "good": "fetched"}
    assert (data_dir / "raw" / "good" / "a" / "1.png").read_bytes() == b"one"
    lock = yaml.safe_load((manifests_dir.parent / "manifests.lock").read_text())
    assert list(lock["datasets"]) == ["good"]


def test_all_good_exits_0_and_a_rerun_is_a_no_op(loopback, monkeypatch, tmp_path, write_manifest, manifests_dir,
                                                 data_dir):
    monkeypatch.setenv("MMBU_ZENODO_URL", loopback.url)
    serve_zenodo_record(loopback, 21, {"labels.csv": b"x,y\n"})
    write_manifest("zen", {"kind": "zenodo", "record": 21})
    args = ["fetch", "--manifests", str(manifests_dir), "--data", str(data_dir),
            "--http-policies", str(policies_file(tmp_path)), "--report", str(tmp_path / "r.jsonl")]
    first = CliRunner().invoke(cli, args)
    assert first.exit_code == 0, first.output
    seen = len(loopback.requests)
    second = CliRunner().invoke(cli, args)
    assert second.exit_code == 0 and "already complete" in second.output
    assert len(loopback.requests) == seen
    assert json.loads((tmp_path / "r.jsonl").read_text())["status"] == "up_to_date"


def test_mmbu_http_policies_names_the_policies_of_every_session_the_toolkit_builds(
        loopback, monkeypatch, tmp_path, write_manifest, manifests_dir, data_dir):
    # a host that fails once: the fast test policy retries it; a file allowing one attempt makes the fetch fail
    def flaky() -> None:  # each run meets a fresh host that fails its first download (the plan's size probe aside)
        served = file_with_range(b"x,y\n")
        downloads = []

        def answer(request: Request) -> Reply:
            if request.headers.get("range") == "bytes=0-0":
                return served(request)
            downloads.append(request)
            return Reply(503, b"busy") if len(downloads) == 1 else served(request)

        loopback.add("GET", "/files/labels.csv", answer)

    flaky()
    manifest = write_manifest("flaky", {"kind": "url", "files": [{"url": f"{loopback.url}/files/labels.csv"}]})
    one_attempt = tmp_path / "one.yaml"
    one_attempt.write_text(yaml.safe_dump({"*": {**FAST_POLICIES["*"], "max_attempts": 1}}))
    monkeypatch.setenv("MMBU_HTTP_POLICIES", str(one_attempt))

    failed = fetch_dataset(manifest, data_dir)
    assert failed.status == "error" and "HTTP 503" in failed.error

    args = ["fetch", "--manifests", str(manifests_dir), "--data", str(data_dir)]
    flaky()
    assert CliRunner().invoke(cli, args).exit_code == 1
    flaky()
    assert CliRunner().invoke(cli, args, env={"MMBU_HTTP_POLICIES": str(policies_file(tmp_path))}).exit_code == 0
    assert (data_dir / "raw" / "flaky" / "labels.csv").read_bytes() == b"x,y\n"

    (tmp_path / "bad.yaml").write_text("'*': {requests_per_second: -1}\n")
    bad = CliRunner().invoke(cli, args, env={"MMBU_HTTP_POLICIES": str(tmp_path / "bad.yaml")})
    assert bad.exit_code == 2
    assert f"{tmp_path / 'bad.yaml'}: host *: field requests_per_second" in bad.output


def test_unreadable_manifests_dir_is_exit_2(tmp_path):
    result = CliRunner().invoke(cli, ["fetch", "--manifests", str(tmp_path / "nope"), "--data", str(tmp_path)])
    assert result.exit_code == 2 and "--manifests" in result.output and "Traceback" not in result.output


def test_corrupt_lock_file_is_exit_2(tmp_path, write_manifest, manifests_dir):
    write_manifest("x", {"kind": "local", "path": "x"})
    (manifests_dir.parent / "manifests.lock").write_text("datasets:\n  x:\n    files: {a: {sha256: nothex}}\n")
    result = CliRunner().invoke(cli, ["fetch", "--manifests", str(manifests_dir), "--data", str(tmp_path / "d")])
    assert result.exit_code == 2 and "manifests.lock" in result.output


def test_only_with_an_unknown_id_is_a_usage_error(tmp_path, write_manifest, manifests_dir):
    write_manifest("x", {"kind": "local", "path": "x"})
    result = CliRunner().invoke(cli, ["fetch", "--manifests", str(manifests_dir), "--only", "y"])
    assert result.exit_code == 2 and "no manifest for y" in result.output
