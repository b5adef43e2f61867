"""The runner's pace: prepared images live only while their row is asked; the progress line's rates."""
from __future__ import annotations

import asyncio

import pytest

from mmbu.benchmark_eval.backends import OpenAICompatBackend, OpenAICompatClient
from mmbu.benchmark_eval.models import default_registry
from mmbu.benchmark_eval.records import read_records
from mmbu.benchmark_eval.runner import RunConfig, Runner, core
from mmbu.benchmark_eval.runner.cli import pace_text
from mmbu.benchmark_eval.runner.core import Progress
from mmbu.benchmark_eval.tasks import images
from support.eval_release import write_release
from support.openai_server import OpenAIServer

QWEN25 = default_registry().get("Qwen/Qwen2.5-VL-7B-Instruct")
ROWS = 40
CONCURRENCY = 2


def test_prepared_images_live_only_while_their_rows_requests_are_queued_or_in_flight(tmp_path, monkeypatch):
    """A server slower than preparation: rows are prepared only as requests are admitted (concurrency plus
    the rows prepared ahead), never all at once, and every request is still answered."""
    release = write_release(tmp_path / "release", tasks=("ungrounded_classification",), count=ROWS, size=(320, 240))
    prepared: list[str] = []
    answered: dict[str, int] = {}
    alive: list[int] = []
    real_prepare = images.prepare_image

    def counting_prepare(png, entry, **kwargs):   # the real preparation, counted
        result = real_prepare(png, entry, **kwargs)
        prepared.append(png[-16:].hex())
        return result

    monkeypatch.setattr(core, "prepare_image", counting_prepare)     # thumbnails, on the event loop
    monkeypatch.setattr(images, "prepare_image", counting_prepare)   # the rest, through tasks.image_cache

    class Watching(OpenAICompatBackend):
        async def generate(self, request):
            sample = request.request_id.split("/")[0]
            alive.append(len(prepared) - sum(1 for n in answered.values() if n == 6))
            answer = await super().generate(request)
            answered[sample] = answered.get(sample, 0) + 1
            return answer

    config = RunConfig(release_dir=release, runs_dir=tmp_path / "runs", entry=QWEN25,
                       tasks=("ungrounded_classification",), forms=("closed", "open"),
                       templates=("no_context", "modality", "full_context"), concurrency=CONCURRENCY)

    async def go(url):
        backend = Watching(OpenAICompatClient(url, QWEN25.served_name, concurrency=CONCURRENCY), QWEN25.chat)
        try:
            return await asyncio.wait_for(Runner(config, backend).run(), 60)
        finally:
            await backend.aclose()

    with OpenAIServer(latency_s=0.02) as server:
        outcome = asyncio.run(go(server.url))
    assert outcome.progress.ok == ROWS * 6 and len(prepared) == ROWS
    admitted = CONCURRENCY + max(4, CONCURRENCY // 8) * 6      # requests queued or in flight at most
    assert max(alive) <= admitted // 6 + 2 < ROWS / 4
    assert len(read_records(config.predictions)) == ROWS * 6


def test_progress_counts_tokens_from_usage_and_gives_rates_and_an_eta():
    progress = Progress(expected=100, skipped=10)
    progress.count("ok", None, {"prompt_tokens": 120, "completion_tokens": 8, "total_tokens": 128})
    started = progress.first_answer
    for _ in range(9):
        progress.count("ok", None, {"prompt_tokens": 120, "completion_tokens": 8})
    progress.count("error", "timeout", None)
    progress.count("error", "bad_response", {"prompt_tokens": "n/a"})   # a server's odd usage is ignored
    assert (progress.prompt_tokens, progress.completion_tokens, progress.error) == (1200, 80, 2)
    per_s, tokens_s, eta = progress.rates(started + 4.0)
    assert per_s == pytest.approx(12 / 4) and tokens_s == pytest.approx(1280 / 4)
    assert eta == pytest.approx((100 - 10 - 12) / 3)
    assert pace_text(progress, started + 4.0) == "3.0 req/s · 320 tok/s · ETA 00:00:26"


def test_the_pace_before_any_answer_has_no_eta():
    assert pace_text(Progress(expected=5)) == "0.0 req/s · 0 tok/s · ETA –"
