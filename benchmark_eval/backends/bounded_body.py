"""Reading an HTTP answer without letting the server decide how much memory it costs.

A chat completion is a few kilobytes (tens with a long reasoning block). A broken or hostile server can
send 200 MB, or 1 MB of gzip that inflates to 1 GiB; at hundreds of requests in flight that is many
gigabytes. So the client turns off aiohttp's automatic decompression (which inflates each network chunk
whole, a thousandfold for a bomb) and reads here: the body on the wire and the inflated body are both cut
off at `limit` bytes, and the request fails with `ResponseTooLarge`. Inflation goes `_CHUNK` bytes at a time onto
the body, which is returned as it is (never copied), so memory is bounded by `limit` × requests in flight (plus
a piece each), whatever the server sends.

Time is bounded the same way: the client's per-request timeout covers the whole exchange, and a body that
arrives slower than `min_rate` bytes a second (averaged over `RATE_WINDOW_S`) is cut at once
(`ResponseTooSlow`), so a server dripping a byte a second costs seconds, not the timeout times every retry.
The fetch's HTTP client (`mmbu.curation.http.bounded_chunks`) applies the same two bounds to downloads.
"""
from __future__ import annotations

import time
import zlib

import aiohttp

DEFAULT_MAX_RESPONSE_BYTES = 8 * 1024 * 1024  # 8 MiB: about 2,000 times a typical completion
DEFAULT_MIN_RESPONSE_RATE = 1024.0  # bytes/s: a completion arrives at once once generated; a drip does not
RATE_WINDOW_S = 10.0
_CHUNK = 64 * 1024
_WBITS = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}


class ResponseTooLarge(Exception):
    """The answer (on the wire or inflated) exceeds the client's limit; the message names both."""


class ResponseTooSlow(Exception):
    """The answer's body arrived slower than the client's minimum rate."""


async def read_bounded_body(response: aiohttp.ClientResponse, limit: int, url: str,
                            min_rate: float = DEFAULT_MIN_RESPONSE_RATE) -> bytearray:
    """The whole body of `response`, inflated if gzip/deflate, or ResponseTooLarge past `limit` bytes, or
    ResponseTooSlow when it arrives slower than `min_rate` bytes/s (0: no minimum)."""
    encoding = response.headers.get("Content-Encoding", "identity").strip().lower()
    if encoding not in ("identity", "", *_WBITS):
        raise aiohttp.ClientPayloadError(f"the server compressed its answer as {encoding!r}, which was not asked for")
    declared = response.content_length
    if declared is not None and declared > limit:
        raise ResponseTooLarge(_too_large(url, limit, f"declares {declared:,} bytes"))
    inflater = zlib.decompressobj(_WBITS[encoding]) if encoding in _WBITS else None
    body = bytearray()
    wire = 0
    window_start, window_bytes = time.monotonic(), 0
    async for chunk in response.content.iter_any():  # what each receive brought: a drip is seen byte by byte
        wire += len(chunk)
        window_bytes += len(chunk)
        now = time.monotonic()
        if now - window_start >= RATE_WINDOW_S:
            if min_rate and window_bytes / (now - window_start) < min_rate:
                raise ResponseTooSlow(f"{url}: the answer arrived at {window_bytes / (now - window_start):,.0f} "
                                      f"bytes/s, below the {min_rate:,.0f} bytes/s minimum; it was cut")
            window_start, window_bytes = now, 0
        if wire > limit:
            raise ResponseTooLarge(_too_large(url, limit, "sent more"))
        if inflater is None:
            body += chunk
            continue
        _inflate_into(body, inflater, chunk, limit, url, encoding)
    if inflater is not None:
        _inflate_into(body, inflater, b"", limit, url, encoding)  # what zlib still holds, as bounded as the rest
    if len(body) > limit:
        raise ResponseTooLarge(_too_large(url, limit, "sent more"))
    return body  # not copied into bytes: a body near the limit would be held twice


def _inflate_into(body: bytearray, inflater: "zlib._Decompress", data: bytes, limit: int, url: str,
                  encoding: str) -> None:
    """Inflate `data` onto `body` `_CHUNK` bytes at a time, ResponseTooLarge once `body` would pass `limit`.

    One `decompress(data, limit)` call returned up to `limit` bytes that were then copied onto `body`: twice the
    limit per request at once (a gzip bomb at --concurrency 100 held ~1.7 GiB against a promised 800 MiB). In
    pieces, a request holds its body and one piece."""
    try:
        while True:
            piece = inflater.decompress(data, _CHUNK)
            if len(body) + len(piece) > limit:
                raise ResponseTooLarge(_too_large(url, limit, f"inflates ({encoding}) to more"))
            body += piece
            data = inflater.unconsumed_tail
            if not data and len(piece) < _CHUNK:
                return  # input used up and no output left pending
    except zlib.error as error:
        raise aiohttp.ClientPayloadError(f"the server's {encoding} answer is corrupt ({error})") from None


def _too_large(url: str, limit: int, what: str) -> str:
    return f"{url}: the answer {what} than the {limit / 1024 / 1024:g} MiB limit (--max-response-mib); it was not kept"
