"""The OpenAI-compatible client against the loopback server: retries, limits, refusals, secrets."""
from __future__ import annotations

import asyncio
import re
import time

import pytest

from mmbu.benchmark_eval.backends import BackendError, ModelRequest, OpenAICompatBackend, OpenAICompatClient
from mmbu.benchmark_eval.models import ChatQuirks
from support.openai_server import OpenAIServer

TEXT = [{"role": "user", "content": "Reply with one letter.\nA. nucleus\nB. platelet"}]


@pytest.fixture
def server():
    with OpenAIServer(default_family="chatty") as running:
        yield running


def run(coroutine):
    return asyncio.run(coroutine)


async def chat_once(url, messages=TEXT, **client_args):
    async with OpenAICompatClient(url, "loopback-vlm", **client_args) as client:
        return await client.chat(messages, max_tokens=64, seed=7), client


def test_answer_usage_and_request_body(server, monkeypatch):
    monkeypatch.setenv("MY_KEY", "sk-secret-123")
    result, client = run(chat_once(server.url, api_key_env="MY_KEY"))
    assert "The correct answer is **" in result.text and result.finish_reason == "stop"
    assert result.usage["prompt_tokens"] == 100 and result.attempts == 1
    body = server.calls[0].body
    assert body["temperature"] == 0 and body["seed"] == 7 and body["max_tokens"] == 64 and body["model"] == "loopback-vlm"
    assert "sk-secret" not in repr(client)


def test_api_key_sent_as_bearer_only_when_set(server, monkeypatch):
    monkeypatch.setenv("MY_KEY", "sk-secret-123")
    run(chat_once(server.url, api_key_env="MY_KEY"))
    monkeypatch.delenv("MY_KEY")
    run(chat_once(server.url, api_key_env="MY_KEY"))
    assert server.calls[0].headers["authorization"] == "Bearer sk-secret-123"
    assert "authorization" not in server.calls[1].headers


def test_429_honours_retry_after_and_shrinks_the_limit_once_per_episode(server):
    server.inject("429", count=3, retry_after=0.3)

    async def go():
        async with OpenAICompatClient(server.url, "m", concurrency=10, backoff_s=0.01) as client:
            started = time.monotonic()
            results = await asyncio.gather(*(client.chat(TEXT) for _ in range(3)))
            return results, time.monotonic() - started, client

    results, elapsed, client = run(go())
    assert all(r.text for r in results) and [r.attempts for r in results] == [2, 2, 2]
    assert elapsed >= 0.3
    assert client.limiter.rate_limit_episodes == 1
    assert client.limiter.limit == pytest.approx(8.0, abs=0.5)  # ×0.8, then a little creep from successes
    assert client.counters["rate_limited"] == 3 and client.counters["retries"] == 3


def test_5xx_are_retried_without_shrinking_the_limit(server):
    server.inject("500", count=2)
    server.inject("bad_body", count=1)
    result, client = run(chat_once(server.url, backoff_s=0.01, concurrency=4))
    assert result.attempts == 4 and result.text
    assert client.limiter.limit == 4 and client.limiter.rate_limit_episodes == 0


def test_dropped_connections_and_cut_bodies_are_retried_then_reported(server):
    server.inject("drop", count=1)
    server.inject("truncated", count=1)
    result, client = run(chat_once(server.url, backoff_s=0.01))
    assert result.attempts == 3 and "The correct answer is" in result.text
    assert client.counters["retries"] == 2

    server.inject("drop", count=3)
    with pytest.raises(BackendError) as info:
        run(chat_once(server.url, max_attempts=3, backoff_s=0.01))
    assert info.value.reason == "connection_error" and info.value.attempts == 3
    assert info.value.status_code is None and server.url.removesuffix("/v1") in str(info.value)


def test_proxy_from_the_environment_is_used_and_no_proxy_bypasses_it(server, monkeypatch):
    # The loopback server plays the proxy: a request for an unresolvable host reaches it only through it.
    monkeypatch.setenv("HTTP_PROXY", server.url.removesuffix("/v1"))
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    result, _ = run(chat_once("http://model-host.invalid:8000/v1"))
    assert result.text and len(server.calls) == 1

    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")  # nothing listens there
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    result, _ = run(chat_once(server.url))
    assert result.text and len(server.calls) == 2


def test_timeout_after_retries_is_a_backend_error(server):
    server.inject("timeout", count=5, delay_s=1.5)
    with pytest.raises(BackendError) as info:
        run(chat_once(server.url, timeout_s=0.3, max_attempts=2, backoff_s=0.01))
    assert info.value.reason == "timeout" and info.value.attempts == 2
    assert "no answer within 0.3 s" in str(info.value)


def test_rate_limit_that_never_ends_is_reported_as_such(server):
    server.inject("429", count=10, retry_after=0)
    with pytest.raises(BackendError) as info:
        run(chat_once(server.url, max_attempts=3, backoff_s=0.01))
    assert info.value.reason == "rate_limited" and info.value.status_code == 429


def test_empty_and_refused_answers_come_back_unretried(server):
    server.inject("empty")
    result, _ = run(chat_once(server.url))
    assert result.is_empty and result.attempts == 1
    server.inject("refusal")
    result, _ = run(chat_once(server.url))
    assert result.is_refusal and result.text == "" and "can't help" in result.refusal
    server.inject("content_filter")
    result, _ = run(chat_once(server.url))
    assert result.refusal == "content_filter"


def test_prompt_too_long_is_not_retried(server):
    server.inject("too_long", count=3)
    with pytest.raises(BackendError) as info:
        run(chat_once(server.url))
    assert info.value.reason == "prompt_too_long" and info.value.attempts == 1


def test_several_base_urls_share_the_load():
    with OpenAIServer(latency_s=0.05) as one, OpenAIServer(latency_s=0.05) as two:
        async def go():
            async with OpenAICompatClient([one.url, two.url], "m", concurrency=8) as client:
                await asyncio.gather(*(client.chat(TEXT) for _ in range(40)))
        run(go())
        assert len(one.calls) + len(two.calls) == 40
        assert 12 <= len(one.calls) <= 28


def test_concurrency_limit_is_respected_and_filled():
    with OpenAIServer(latency_s=0.1) as server:
        async def go():
            async with OpenAICompatClient(server.url, "m", concurrency=12) as client:
                await asyncio.gather(*(client.chat(TEXT) for _ in range(48)))
        run(go())
        assert server.stats.max_in_flight == 12


def test_backend_sends_image_first_and_folds_system_prompt_when_unsupported(server):
    request = ModelRequest("r1", "What is shown?", b"\x89PNG fake", system="Be brief.")

    async def go(supported):
        client = OpenAICompatClient(server.url, "m")
        backend = OpenAICompatBackend(client, ChatQuirks(system_prompt=supported))
        try:
            await backend.generate(request)
        finally:
            await backend.aclose()

    run(go(True))
    run(go(False))
    with_system, folded = server.calls[0].body["messages"], server.calls[1].body["messages"]
    assert [m["role"] for m in with_system] == ["system", "user"]
    assert with_system[1]["content"][0]["image_url"]["url"].startswith("data:image/png;base64,")
    assert [m["role"] for m in folded] == ["user"]
    assert folded[0]["content"][1]["text"] == "Be brief.\n\nWhat is shown?"


def test_the_loopback_server_holds_256_requests_in_flight():
    # Each answer waits 2 s, so all 256 requests meet at the server even when a loaded machine takes a
    # second to send them; max_in_flight proves they were concurrent (no wall-clock bound: that is a benchmark).
    with OpenAIServer(latency_s=2.0, record_bodies=False) as server:
        async def go():
            async with OpenAICompatClient(server.url, "m", concurrency=256) as client:
                await asyncio.gather(*(client.chat(TEXT) for _ in range(256)))
        run(go())
        assert server.stats.max_in_flight == 256 and server.stats.completed == 256


@pytest.mark.parametrize("family, expected", [
    ("qwen25", '"bbox_2d": [40, 30, 120, 90]'),       # pixels of the image as received
    ("qwen3", '"bbox_2d": [250, 250, 750, 750]'),     # 0-1000
    ("gemini", '"box_2d": [250, 250, 750, 750]'),     # y first, 0-1000
    ("llava", "[0.25, 0.25, 0.75, 0.75]"),            # 0-1
    ("internvl", "<box>[[250, 250, 750, 750]]</box>"),
    ("malformed", '{"bbox_2d": [40, 30, 120,'),        # cut-off JSON
])
def test_scripted_boxes_follow_each_familys_convention(family, expected):
    from support.eval_release import object_image, png

    image = png(object_image((160, 120), (40, 30, 120, 90), seed=2))
    request = ModelRequest("r", 'Give one bounding box around the "nucleus".', image)
    with OpenAIServer(default_family=family) as server:
        async def go():
            async with OpenAICompatClient(server.url, "m") as client:
                return await OpenAICompatBackend(client).generate(request)
        answer = run(go())
    assert expected in answer.text


@pytest.mark.parametrize("family, pattern", [
    ("terse", r"^[A-E]$"), ("chatty", r"The correct answer is \*\*[A-E]\*\*"), ("tagged", r"<answer>[A-E]</answer>$"),
    ("json", r'^\{"answer": "[A-E]"\}$'), ("refuser", r"^I'm sorry, but I can't help"),
])
def test_scripted_letters_follow_each_familys_style(family, pattern):
    with OpenAIServer(default_family=family) as server:
        result, _ = run(chat_once(server.url))
    assert re.search(pattern, result.text)


def test_reasoning_model_quirks_shape_the_request(server):
    from mmbu.benchmark_eval.models import default_registry

    gpt5 = default_registry().get("GPT-5.4-mini")
    request = ModelRequest("r", "What is shown?", b"\x89PNG fake", max_tokens=2048)

    async def go():
        async with OpenAICompatClient(server.url, gpt5.served_name) as client:
            await OpenAICompatBackend(client, gpt5.chat).generate(request)

    run(go())
    body = server.calls[0].body
    assert body["model"] == "gpt-5.4-mini" and body["max_completion_tokens"] == 2048
    assert "temperature" not in body and "max_tokens" not in body and body["seed"] == 0


def test_adaptive_limit_shrinks_per_episode_and_creeps_back():
    from mmbu.benchmark_eval.backends.limiter import AdaptiveConcurrency

    limiter = AdaptiveConcurrency(20, cooldown_s=60)
    for _ in range(5):                      # one burst of 429s is one episode
        limiter.on_rate_limited()
    assert limiter.current == 16 and limiter.rate_limit_episodes == 1
    for _ in range(17):                     # about one slot back per round (limit) of successes
        limiter.on_success()
    assert limiter.current == 17
    for _ in range(1000):
        limiter.on_success()
    assert limiter.current == 20            # never above the user's ceiling
    small = AdaptiveConcurrency(2, cooldown_s=0)
    for _ in range(10):
        small.on_rate_limited()
    assert small.current == 1               # never below one
