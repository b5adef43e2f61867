"""Run concurrent chats of the eval's HTTP client in a fresh process: its peak memory and each request's outcome.

The peak is VmHWM, the high-water mark of the process's own memory since exec: getrusage's ru_maxrss would carry
over the size of the forking pytest process.
"""
from __future__ import annotations

import json
import subprocess
import sys

_CLIENT = """
import asyncio, re, json
from mmbu.benchmark_eval.backends.openai_compat import OpenAICompatClient
from mmbu.benchmark_eval.backends.base import BackendError
async def main():
    async with OpenAICompatClient({url!r}, "m", api_key_env=None, concurrency={requests}, max_attempts=1,
                                  timeout_s=120, **{limit}) as client:
        async def one():
            try:
                await client.chat([{{"role": "user", "content": "hi"}}])
                return "ok"
            except BackendError as error:
                return error.reason
        return await asyncio.gather(*[one() for _ in range({requests})])
reasons = asyncio.run(main())
peak = int(re.search(r"VmHWM:\\s+(\\d+) kB", open("/proc/self/status").read()).group(1))
print(json.dumps([peak, reasons]))
"""


def client_peak_kib(base_url: str, requests: int, max_response_bytes: int | None = None) -> tuple[int, list[str]]:
    """`requests` concurrent chats against `base_url`: the client's peak RSS (KiB) and each one's `ok` or reason."""
    limit = {"max_response_bytes": max_response_bytes} if max_response_bytes else {}
    script = _CLIENT.format(url=base_url, requests=requests, limit=limit)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    peak, reasons = json.loads(result.stdout.splitlines()[-1])
    return peak, reasons
