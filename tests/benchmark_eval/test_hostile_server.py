"""A hostile or broken model server (issue 16, points 2, 3 and 8): a malformed reply, an endless or
bomb-sized body and a proxy that echoes the API key each cost their own record, never the run, never
memory beyond the limit, and never leak the key into what the run writes."""
from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys

import pytest
from click.testing import CliRunner

from mmbu.benchmark_eval.backends.base import BackendError
from mmbu.benchmark_eval.backends.openai_compat import OpenAICompatClient
from mmbu.benchmark_eval.records import read_records
from mmbu.benchmark_eval.runner.cli import run
from support.eval_release import write_release
from support.client_peak import client_peak_kib
from support.openai_server import MALFORMED, OpenAIServer

SLUG = "Qwen__Qwen3-VL-8B-Instruct"
FAST = ["--retry-backoff", "0.01", "--timeout", "20", "--max-attempts", "1"]
KEY = "sk-test-4f8c1e2a9b7d6e5f4a3b2c1d0e9f8a7b"


@pytest.fixture(scope="module")
def release_dir(tmp_path_factory):
    return write_release(tmp_path_factory.mktemp("release"), count=3)


def _run(release_dir, server, out, *extra):
    return CliRunner().invoke(run, ["--release", str(release_dir), "--model", "Qwen3-VL-8B", "--base-url", server.url,
                                    "--out", str(out), "--tasks", "ungrounded_classification", *FAST, *extra],
                              catch_exceptions=False)


@pytest.mark.parametrize("kind", sorted(MALFORMED))
def test_valid_json_of_the_wrong_shape_is_that_records_error_and_the_run_goes_on(release_dir, tmp_path, kind):
    with OpenAIServer() as server:
        server.inject(kind, count=2)
        result = _run(release_dir, server, tmp_path)
    records = read_records(tmp_path / SLUG / "predictions.jsonl")
    assert len(records) == 3 * 2 * 3  # every question of the task was asked and recorded
    errors = [r for r in records if r.status == "error"]
    if kind == "usage_list":  # the answer itself is fine; the malformed usage is dropped
        assert result.exit_code == 0 and not errors
        assert sum(r.usage is None for r in records) == 2
        return
    assert result.exit_code == 1, result.output  # 1: some requests failed, each in its record
    assert len(errors) == 2 and {r.error_reason for r in errors} == {"bad_response"}
    assert all("not a chat completion" in r.error for r in errors)


@pytest.mark.parametrize("fault", ["huge", "huge_declared", "gzip_bomb"])
def test_oversized_answers_are_errors_and_memory_stays_bounded(fault):
    with OpenAIServer() as server:
        server.inject(fault, count=8)
        peak_kib, reasons = client_peak_kib(server.url, 8)
    assert reasons == ["response_too_large"] * 8
    # 8 answers of 200 MB (or 1 GiB inflated) would be gigabytes; the cap is 8 MiB each
    assert peak_kib < 400 * 1024, f"peak {peak_kib // 1024} MiB"


def test_the_limit_is_a_setting_and_the_error_says_which(release_dir, tmp_path):
    with OpenAIServer() as server:
        client = OpenAICompatClient(server.url, "m", api_key_env=None, max_attempts=1, max_response_bytes=300)

        async def ask():
            async with client:
                return await client.chat([{"role": "user", "content": "hi"}])

        with pytest.raises(BackendError) as error:
            asyncio.run(ask())
    assert error.value.reason == "response_too_large"
    assert "limit (--max-response-mib)" in str(error.value)


def test_a_proxy_echoing_the_key_never_puts_it_on_disk(release_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("MY_VLM_KEY", KEY)
    with OpenAIServer() as server:
        server.inject("echo_auth", count=3)
        result = _run(release_dir, server, tmp_path, "--api-key-env", "MY_VLM_KEY")
        assert server.calls[0].headers["authorization"] == f"Bearer {KEY}"  # it was sent, and echoed
    assert result.exit_code == 1
    written = b"".join(path.read_bytes() for path in (tmp_path / SLUG).rglob("*") if path.is_file())
    assert KEY.encode() not in written and KEY[8:].encode() not in written
    assert KEY not in result.output
    errors = [r for r in read_records(tmp_path / SLUG / "predictions.jsonl") if r.status == "error"]
    assert len(errors) == 3 and all("***" in r.error for r in errors)


def test_credentials_in_a_base_url_are_refused_without_repeating_them(release_dir, tmp_path):
    with OpenAIServer() as server:
        url = server.url.replace("http://", f"http://alice:{KEY}@")
        result = subprocess.run([sys.executable, "-m", "mmbu", "eval", "run", "--release", str(release_dir), "--model",
                                 "Qwen3-VL-8B", "--base-url", url, "--out", str(tmp_path), *FAST],
                                capture_output=True, text=True, timeout=120, env={**os.environ})
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "carries credentials (user:key@)" in result.stderr and KEY not in result.stderr + result.stdout
    assert not any(KEY.encode() in p.read_bytes() for p in tmp_path.rglob("*") if p.is_file())


def test_a_truncated_run_file_is_scored_as_incomplete_never_as_if_whole(release_dir, tmp_path):
    from mmbu.benchmark_eval.scoring.cli import score

    with OpenAIServer() as server:
        assert _run(release_dir, server, tmp_path, "--max-attempts", "2").exit_code == 0
    predictions = tmp_path / SLUG / "predictions.jsonl"
    lines = predictions.read_bytes().splitlines(keepends=True)
    assert len(lines) == 18
    predictions.write_bytes(b"".join(lines[:10]) + lines[10][:40])  # a copy cut in the middle of record 11

    result = CliRunner().invoke(score, [str(tmp_path / SLUG), "--out", str(tmp_path / "scores.json"),
                                        "--resamples", "50"], catch_exceptions=False)

    assert result.exit_code == 1, result.output
    scores = [r for r in json.loads((tmp_path / "scores.json").read_text()) if r["kind"] == "score"]
    assert len(scores) == 6  # every configuration the run was asked for is listed, none silently dropped
    assert sum(r["missing"] for r in scores) == 8 and all(r["expected"] == 3 for r in scores)
    for row in scores:
        assert (row["f1"] is None) == (row["missing"] > 0)
    assert "records are missing from the run file" in result.output


def test_eval_run_on_a_full_disk_is_one_sentence_and_resumes_once_space_is_freed(release_dir, tmp_path):
    from support.faulty_disk import full_disk, grow

    with OpenAIServer() as server, full_disk(tmp_path / "runs", 24 * 1024) as (runs, preexec):
        command = [sys.executable, "-m", "mmbu", "eval", "run", "--release", str(release_dir), "--model", "Qwen3-VL-8B",
                   "--base-url", server.url, "--out", str(runs), *FAST]
        result = subprocess.run(command, capture_output=True, text=True, timeout=240, preexec_fn=preexec)
        assert result.returncode == 2, result.stderr
        assert "Traceback" not in result.stderr
        assert "the disk is full" in result.stderr or "file size limit" in result.stderr
        grow(runs)
        again = subprocess.run(command, capture_output=True, text=True, timeout=240)
        assert again.returncode == 0, again.stderr
        records = read_records(runs / SLUG / "predictions.jsonl")
        assert len({r.key for r in records}) == 4 * 3 * 2 * 3


def test_a_server_dripping_its_answer_is_cut_by_the_minimum_rate(monkeypatch):
    """Issue 32, point 2: a body arriving a byte at a time is cut after the rate window, not after the timeout times
    every retry (the judge's client is this one; `mmbu eval judge --min-response-rate`)."""
    import time

    from support.loopback import LoopbackServer, Reply

    from mmbu.benchmark_eval.backends import bounded_body

    monkeypatch.setattr(bounded_body, "RATE_WINDOW_S", 0.5)
    with LoopbackServer() as server:
        server.add("POST", "/v1/chat/completions", Reply(200, chunks=iter([b" "] * 10_000), chunk_delay=0.05,
                                                         headers={"Content-Type": "application/json"}))
        client = OpenAICompatClient(server.url + "/v1", "m", api_key_env=None, max_attempts=2, timeout_s=60,
                                    backoff_s=0.01)

        async def ask():
            async with client:
                return await client.chat([{"role": "user", "content": "hi"}])

        started = time.monotonic()
        with pytest.raises(BackendError) as error:
            asyncio.run(ask())
    assert time.monotonic() - started < 5  # 10,000 bytes at 20 bytes/s: the 60 s timeout twice without the minimum
    assert error.value.reason == "timeout"
    assert "bytes/s, below the 1,024 bytes/s minimum; it was cut (after 2 attempts)" in str(error.value)
