"""benchmarks/latency_server.py: the runner benchmark's stand-in model server answers after its latency."""
from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path

import aiohttp
import pytest

from benchmarks import run as runner
from mmbu.benchmark_eval.backends import OpenAICompatClient

SERVER = Path(__file__).resolve().parents[2] / "benchmarks" / "latency_server.py"


@pytest.fixture
def server_url():
    process = subprocess.Popen([sys.executable, str(SERVER), "--latency", "0.2"], stdout=subprocess.PIPE, text=True)
    try:
        yield process.stdout.readline().strip()
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_answers_every_request_after_its_latency_in_order(server_url):
    async def go():
        async with OpenAICompatClient(server_url, "bench", concurrency=8) as client:
            started = time.monotonic()
            answers = await asyncio.gather(*(client.chat([{"role": "user", "content": f"q{i}"}]) for i in range(8)))
            return answers, time.monotonic() - started

    answers, elapsed = asyncio.run(go())
    assert [a.text for a in answers] == ["A"] * 8 and all(a.finish_reason == "stop" for a in answers)
    assert 0.2 <= elapsed < 1.0                     # eight in flight at once: one latency, not eight
    assert all(a.latency_s >= 0.2 for a in answers)


def test_other_paths_and_bodies_are_refused(server_url):
    async def go():
        async with aiohttp.ClientSession() as session:
            async with session.get(server_url + "/models") as missing:
                first = missing.status
            async with session.post(server_url + "/chat/completions", data=b'{"prompt": "x"}') as wrong:
                return first, wrong.status, await wrong.json()

    missing, wrong, body = asyncio.run(go())
    assert missing == 404 and wrong == 400 and "not a chat-completion request" in body["error"]["message"]


def test_it_is_not_run_as_a_benchmark_itself():
    assert "latency_server" not in runner.discover()
