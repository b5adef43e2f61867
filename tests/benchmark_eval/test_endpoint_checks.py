"""A bad endpoint is found before the run (preflight) or stops it (circuit breaker), against real loopback servers:
one that refuses connections, one that answers 401, one that answers 500, one that serves another model, and one
that starts failing mid-run."""
from __future__ import annotations

import json
import time

import pytest
from click.testing import CliRunner

from mmbu.benchmark_eval.backends.openai_compat import CircuitBreaker
from mmbu.benchmark_eval.judge.cli import judge
from mmbu.benchmark_eval.records import read_records
from mmbu.benchmark_eval.runner.cli import run
from support.eval_release import write_release
from support.loopback import LoopbackServer, Reply, closed_port_url
from support.openai_server import OpenAIServer

MODEL, SERVED, SLUG = "Qwen3-VL-8B", "Qwen/Qwen3-VL-8B-Instruct", "Qwen__Qwen3-VL-8B-Instruct"
FAST = ["--retry-backoff", "0.01", "--timeout", "5"]


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    return write_release(tmp_path_factory.mktemp("release"), count=4, tasks=("ungrounded_classification",))


def eval_run(release, base_url: str, out, *extra: str):
    started = time.monotonic()
    result = CliRunner().invoke(run, ["--release", str(release), "--model", MODEL, "--base-url", base_url,
                                      "--out", str(out), *FAST, *extra], catch_exceptions=False)
    return result, time.monotonic() - started


def models_list(*names: str) -> Reply:
    return Reply(200, {"object": "list", "data": [{"id": n, "object": "model"} for n in names]})


def test_a_refused_connection_stops_before_the_run_with_the_os_message(release, tmp_path):
    result, elapsed = eval_run(release, closed_port_url() + "/v1", tmp_path)
    assert result.exit_code == 2 and elapsed < 10, result.output  # not six retries of every request
    assert "cannot reach the model server" in result.output and "Connect call failed" in result.output
    assert not (tmp_path / SLUG / "predictions.jsonl").exists() and "Traceback" not in result.output


def test_an_authentication_error_stops_with_the_servers_message(release, tmp_path, monkeypatch):
    monkeypatch.setenv("LAB_KEY", "sk-wrong-key-0123456789abcdef")
    with LoopbackServer() as server:
        refusal = Reply(401, {"error": {"message": "Incorrect API key provided: sk-wron****cdef.",
                                        "type": "invalid_request_error", "code": "invalid_api_key"}})
        server.add("GET", "/v1/models", refusal)
        server.add("POST", "/v1/chat/completions", refusal)
        result, _ = eval_run(release, server.url + "/v1", tmp_path, "--api-key-env", "LAB_KEY")
        assert [r.path for r in server.requests] == ["/v1/models"]  # nothing else was asked
    assert result.exit_code == 2, result.output
    assert "HTTP 401: Incorrect API key provided" in result.output and "was refused" in result.output
    assert "sk-wrong-key-0123456789abcdef" not in result.output


def test_a_server_answering_500_stops_with_its_message(release, tmp_path):
    with LoopbackServer() as server:
        server.add("GET", "/v1/models", models_list(SERVED))
        server.add("POST", "/v1/chat/completions", Reply(500, {"error": {
            "message": "CUDA error: out of memory (engine core died)", "type": "InternalServerError"}}))
        result, elapsed = eval_run(release, server.url + "/v1", tmp_path)
        assert len(server.requests_to("/v1/chat/completions")) == 1  # the one tiny request, no retries
    assert result.exit_code == 2 and elapsed < 10, result.output
    assert "HTTP 500: CUDA error: out of memory (engine core died)" in " ".join(result.output.split())


def test_a_server_of_another_model_lists_what_it_serves(release, tmp_path):
    with OpenAIServer(served_models=["Qwen/Qwen2.5-VL-7B-Instruct"]) as server:
        result, _ = eval_run(release, server.url, tmp_path)
        assert not server.calls
    text = " ".join(result.output.split())
    assert result.exit_code == 2, result.output
    assert f"does not serve '{SERVED}'" in text and "The model `Qwen/Qwen3-VL-8B-Instruct` does not exist." in text
    assert "it serves: Qwen/Qwen2.5-VL-7B-Instruct" in text and "--served-model-name" in text


def test_a_healthy_server_passes_and_its_reported_model_is_recorded(release, tmp_path):
    with OpenAIServer(served_models=[SERVED], report_as={SERVED: "qwen3-vl-8b-awq-int4"}) as server:
        result, _ = eval_run(release, server.url, tmp_path)
        assert len(server.preflights) == 1 and len(server.calls) == 4 * 6
    assert result.exit_code == 0, result.output
    manifest = json.loads((tmp_path / SLUG / "run.json").read_text())
    assert manifest["served_model_reported"] == ["qwen3-vl-8b-awq-int4"]
    (endpoint,) = manifest["invocations"][-1]["endpoints"]
    assert endpoint["served_models"] == [SERVED] and endpoint["reported_model"] == "qwen3-vl-8b-awq-int4"


def test_the_judge_endpoint_is_checked_too(release, tmp_path):
    with OpenAIServer() as server:
        assert eval_run(release, server.url, tmp_path)[0].exit_code == 0
    result = CliRunner().invoke(judge, [str(tmp_path / SLUG), "--judge-base-url", closed_port_url() + "/v1"])
    assert result.exit_code == 2 and "cannot reach the judge server" in result.output, result.output
    with OpenAIServer(served_models=["Qwen/Qwen3-32B"]) as server:
        result = CliRunner().invoke(judge, [str(tmp_path / SLUG), "--judge-base-url", server.url,
                                            "--judge-model", "Qwen/Qwen3-32b"])
    assert result.exit_code == 2 and "Did you mean 'Qwen/Qwen3-32B'?" in result.output and "--judge-model" in result.output


@pytest.mark.parametrize("fault, first_error", [
    ("500", "HTTP 500 The server had an error while processing your request. (after 2 attempts)"),
    ("drop", "ServerDisconnectedError: Server disconnected (after 2 attempts)"),
])
def test_the_breaker_stops_a_run_whose_server_fails_mid_way(release, tmp_path, fault, first_error):
    with OpenAIServer(latency_s=0.02) as server:
        server.inject(fault, count=10_000)  # every request of the run fails; the preflight got through
        result, elapsed = eval_run(release, server.url, tmp_path, "--max-attempts", "2",
                                   "--max-consecutive-failures", "3", "--concurrency", "1")
        asked = len(server.calls)
    text = " ".join(result.output.split())
    assert result.exit_code == 1 and elapsed < 20, result.output
    assert "stopped: 3 requests in a row failed" in text and first_error in text
    assert "resume with:" in text and "records in" in text
    assert asked == 3 * 2  # three requests, two attempts each, then nothing more
    records = read_records(tmp_path / SLUG / "predictions.jsonl")
    assert len(records) == 2 and all(r.status == "error" for r in records)  # the third one stopped the run


def test_the_breaker_stops_worker_processes_too(release, tmp_path):
    with OpenAIServer() as server:
        server.inject("503", count=10_000)
        result, _ = eval_run(release, server.url, tmp_path, "--max-attempts", "1", "--max-consecutive-failures", "2",
                             "--workers", "2", "--concurrency", "2")
    text = " ".join(result.output.split())
    assert result.exit_code == 1 and "stopped: 2 requests in a row failed" in text and "HTTP 503" in text, text
    assert "resume with:" in text and "Traceback" not in text


def test_the_breaker_stops_the_judge(release, tmp_path):
    with OpenAIServer() as server:
        assert eval_run(release, server.url, tmp_path)[0].exit_code == 0
    with OpenAIServer() as judge_server:
        judge_server.inject("503", count=10_000)
        result = CliRunner().invoke(judge, [str(tmp_path / SLUG), "--judge-base-url", judge_server.url,
                                            "--max-consecutive-failures", "2", "--concurrency", "1",
                                            "--retry-backoff", "0.01"])
    text = " ".join(result.output.split())
    assert result.exit_code == 1 and "stopped: 2 requests in a row failed" in text and "HTTP 503" in text, text
    assert "resume with:" in text


def test_the_breaker_counts_endpoint_failures_in_a_row_only():
    breaker = CircuitBreaker(3)
    for reason in ("server_error", "connection_error"):
        breaker.failed(reason, f"first {reason}")
    breaker.failed("bad_request", "HTTP 400")  # the server answered: the streak ends
    breaker.succeeded()
    breaker.failed("timeout", "no answer within 5 s")
    breaker.failed("server_error", "HTTP 502")
    assert not breaker.open
    breaker.failed("server_error", "HTTP 503")
    assert breaker.open and breaker.message.endswith("the first: no answer within 5 s")
    assert not CircuitBreaker(0).open and CircuitBreaker(None).limit is None
