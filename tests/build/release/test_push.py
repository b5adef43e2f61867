"""`mmbu release push` against a loopback Hub (the endpoints huggingface_hub calls), and the pushed commit evaluated
back with `mmbu eval run --release hf://OWNER/NAME@SHA`."""
from __future__ import annotations

import hashlib
import json
import shutil

import pytest
from click.testing import CliRunner
from huggingface_hub import constants
from support.hub_server import LoopbackHub
from support.openai_server import OpenAIServer

from mmbu.benchmark_eval.records import read_records
from mmbu.benchmark_eval.runner.cli import run
from mmbu.build.release import write_release
from mmbu.build.release.cli import push
from mmbu.core.checksums import verify_sha256sums

TOKEN = "hf_" + "loopbackTokenForTests0123"


@pytest.fixture
def release(built, tmp_path):
    out = tmp_path / "release"
    write_release(built["rows_by_task"], out, built["manifests"],
                  {**built["build_info"], "inputs_hash": "cd34" * 16, "toolkit_version": "0.2.0"},
                  exclusions=built["exclusions"])
    return out


@pytest.fixture
def hub(monkeypatch, tmp_path):
    with LoopbackHub(token=TOKEN) as server:
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        monkeypatch.setenv("LAB_HF_TOKEN", TOKEN)
        monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))  # no saved login, no user cache
        monkeypatch.setattr(constants, "HF_HUB_DISABLE_XET", True)  # see support/hub_server.py
        yield server


def invoke_push(*args: str):
    return CliRunner().invoke(push, list(args), catch_exceptions=False)


def test_a_release_is_pushed_as_one_commit_and_the_commit_is_recorded(release, hub):
    result = invoke_push(str(release), "--repo", "mmbu-lab/mmbu-rebuilt", "--token-env", "LAB_HF_TOKEN")
    assert result.exit_code == 0, result.output
    (record,) = json.loads((release / "pushes.json").read_text())
    assert record["repo"] == "mmbu-lab/mmbu-rebuilt" and record["revision"] == "main"
    assert record["commit"] == hub.repos["mmbu-lab/mmbu-rebuilt"].branches["main"] and len(record["commit"]) == 40
    assert record["inputs_hash"] == "cd34" * 16 and f"hf://mmbu-lab/mmbu-rebuilt@{record['commit']}" in result.output
    pushed = hub.files("mmbu-lab/mmbu-rebuilt")
    local = {p.relative_to(release).as_posix(): p.read_bytes() for p in release.rglob("*") if p.is_file()}
    del local["pushes.json"]  # the record of the push is not part of what is pushed
    assert {path: data for path, data in pushed.items() if path != ".gitattributes"} == local  # byte for byte
    shards = [path for path in pushed if path.endswith(".parquet")]
    assert shards and all(hashlib.sha256(pushed[p]).hexdigest() in hub.lfs for p in shards)  # through LFS
    assert pushed["README.md"].startswith(b"---\n")  # the card with its configs, for the dataset viewer
    assert verify_sha256sums(release) == []  # the push record leaves the release's checksums whole
    assert TOKEN not in result.output


def test_a_second_push_to_a_branch_is_a_second_record(release, hub):
    assert invoke_push(str(release), "--repo", "mmbu-lab/r", "--token-env", "LAB_HF_TOKEN").exit_code == 0
    result = invoke_push(str(release), "--repo", "mmbu-lab/r", "--token-env", "LAB_HF_TOKEN", "--revision", "v1")
    assert result.exit_code == 0, result.output
    records = json.loads((release / "pushes.json").read_text())
    assert [r["revision"] for r in records] == ["main", "v1"]
    assert records[1]["commit"] == hub.repos["mmbu-lab/r"].branches["v1"]


def test_a_refused_token_and_a_damaged_release_are_bad_input(release, hub, monkeypatch):
    monkeypatch.setenv("WRONG", "hf_" + "notTheRightTokenAtAll99")
    refused = invoke_push(str(release), "--repo", "mmbu-lab/r", "--token-env", "WRONG")
    assert refused.exit_code == 2 and "Invalid credentials" in refused.output, refused.output
    assert "notTheRightTokenAtAll99" not in refused.output
    assert invoke_push(str(release), "--repo", "mmbu-lab/r", "--token-env", "UNSET_VAR").exit_code == 2
    (release / "LICENSE").write_text("changed after the build\n")
    damaged = invoke_push(str(release), "--repo", "mmbu-lab/r", "--token-env", "LAB_HF_TOKEN")
    assert damaged.exit_code == 2 and "LICENSE: checksum differs" in damaged.output
    assert not hub.repos and not (release / "pushes.json").exists()


def test_the_pushed_commit_is_evaluated_from_the_hub(release, hub, tmp_path, monkeypatch):
    assert invoke_push(str(release), "--repo", "mmbu-lab/r", "--token-env", "LAB_HF_TOKEN").exit_code == 0
    commit = json.loads((release / "pushes.json").read_text())[0]["commit"]
    shutil.rmtree(release)  # only the Hub has it now
    cache = tmp_path / "release-cache"
    with OpenAIServer() as server:
        args = ["--model", "Qwen3-VL-8B", "--base-url", server.url, "--out", str(tmp_path / "runs"),
                "--tasks", "ungrounded_classification", "--release-cache", str(cache)]
        result = CliRunner().invoke(run, ["--release", f"hf://mmbu-lab/r@{commit}", *args], catch_exceptions=False)
        assert result.exit_code == 0, result.output
        by_option = CliRunner().invoke(run, ["--release", "mmbu-lab/r", "--revision", commit, *args],
                                       catch_exceptions=False)
        assert by_option.exit_code == 0 and "skipped" in by_option.output  # the same release: nothing asked again
    run_dir = tmp_path / "runs" / "Qwen__Qwen3-VL-8B-Instruct"
    manifest = json.loads((run_dir / "run.json").read_text())
    assert manifest["release_source"] == f"hf://mmbu-lab/r@{commit}"
    assert manifest["release_inputs_hash"] == "cd34" * 16
    assert read_records(run_dir / "predictions.jsonl")


def test_a_downloaded_release_that_fails_its_checksums_is_refused(release, hub, tmp_path):
    assert invoke_push(str(release), "--repo", "mmbu-lab/r", "--token-env", "LAB_HF_TOKEN").exit_code == 0
    commit = json.loads((release / "pushes.json").read_text())[0]["commit"]
    files = hub.repos["mmbu-lab/r"].commits[commit]
    files["LICENSE"] = b"tampered on the way\n"  # the Hub now serves other bytes than the release listed
    result = CliRunner().invoke(run, ["--release", f"hf://mmbu-lab/r@{commit}", "--model", "Qwen3-VL-8B",
                                      "--base-url", "http://127.0.0.1:9/v1", "--out", str(tmp_path / "runs"),
                                      "--release-cache", str(tmp_path / "cache")])
    assert result.exit_code == 2 and "LICENSE: checksum differs" in result.output, result.output
