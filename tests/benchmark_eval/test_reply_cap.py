"""The eval's reply cap holds after decompression (issue 32, point 9): a request inflating a gzip bomb held the
inflated output of one `decompress` call (up to the limit) and its copy onto the body, twice `--max-response-mib`,
and a body kept was copied once more into bytes. It now inflates 64 KiB at a time onto the body and keeps the body
as it is: a request holds its limit and a piece, so requests in flight hold at most the limit × concurrency."""
from __future__ import annotations

from support.client_peak import client_peak_kib
from support.openai_server import OpenAIServer

LIMIT = 4 * 1024 * 1024
REQUESTS = 48
ONE_LIMIT = 96 * 1024 * 1024  # one request alone, large enough to stand out of the interpreter's own size

def _peak_kib(fault: str | None, requests: int = REQUESTS, limit: int = LIMIT) -> tuple[int, list[str]]:
    with OpenAIServer() as server:
        if fault:
            server.inject(fault, count=requests)
        return client_peak_kib(server.url, requests, limit)


def test_a_gzip_bomb_costs_at_most_the_limit_per_request_in_flight():
    baseline, ok = _peak_kib(None)
    bombed, reasons = _peak_kib("gzip_bomb")
    assert ok == ["ok"] * REQUESTS and reasons == ["response_too_large"] * REQUESTS
    promised = REQUESTS * LIMIT // 1024  # KiB: the README's limit × concurrency
    # each bomb inflates a thousandfold, so every request reaches the limit; twice the limit each failed this
    assert bombed - baseline < promised * 1.2, f"{(bombed - baseline) // 1024} MiB above a plain run"


def test_one_request_inflating_a_bomb_holds_its_limit_not_twice_it():
    baseline, _ = _peak_kib(None, 1, ONE_LIMIT)
    bombed, reasons = _peak_kib("gzip_bomb", 1, ONE_LIMIT)
    assert reasons == ["response_too_large"]
    assert bombed - baseline < ONE_LIMIT // 1024 * 1.25, f"{(bombed - baseline) // 1024} MiB for a {ONE_LIMIT >> 20} MiB limit"
