"""Reading an HTTP answer without letting the server decide how much memory it costs.

A chat completion is a few kilobytes (tens with a long reasoning block). A broken or hostile server can
send 200 MB, or 1 MB of gzip that inflates to 1 GiB; at hundreds of requests in flight that is many
gigabytes. So the client turns off aiohttp's automatic decompression (which inflates each network chunk
whole, a thousandfold for a bomb) and reads here: the body on the wire and the inflated body are both cut
off at `limit` bytes, and the request fails with `ResponseTooLarge`. Memory is then bounded by
`limit` × requests in flight, whatever the server sends.
"""
from __future__ import annotations

import zlib

import aiohttp

DEFAULT_MAX_RESPONSE_BYTES = 8 * 1024 * 1024  # 8 MiB: about 2,000 times a typical completion
_CHUNK = 64 * 1024
_WBITS = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}


class ResponseTooLarge(Exception):
    """The answer (on the wire or inflated) exceeds the client's limit; the message names both."""


async def read_bounded_body(response: aiohttp.ClientResponse, limit: int, url: str) -> bytes:
    """The whole body of `response`, inflated if gzip/deflate, or ResponseTooLarge past `limit` bytes."""
    encoding = response.headers.get("Content-Encoding", "identity").strip().lower()
    if encoding not in ("identity", "", *_WBITS):
        raise aiohttp.ClientPayloadError(f"the server compressed its answer as {encoding!r}, which was not asked for")
    declared = response.content_length
    if declared is not None and declared > limit:
        raise ResponseTooLarge(_too_large(url, limit, f"declares {declared:,} bytes"))
    inflater = zlib.decompressobj(_WBITS[encoding]) if encoding in _WBITS else None
    body = bytearray()
    wire = 0
    async for chunk in response.content.iter_chunked(_CHUNK):
        wire += len(chunk)
        if wire > limit:
            raise ResponseTooLarge(_too_large(url, limit, "sent more"))
        if inflater is None:
            body += chunk
            continue
        try:
            body += inflater.decompress(chunk, limit + 1 - len(body))
            if len(body) > limit or inflater.unconsumed_tail:
                raise ResponseTooLarge(_too_large(url, limit, f"inflates ({encoding}) to more"))
        except zlib.error as error:
            raise aiohttp.ClientPayloadError(f"the server's {encoding} answer is corrupt ({error})") from None
    if inflater is not None:
        body += inflater.flush()
    if len(body) > limit:
        raise ResponseTooLarge(_too_large(url, limit, "sent more"))
    return bytes(body)


def _too_large(url: str, limit: int, what: str) -> str:
    return f"{url}: the answer {what} than the {limit / 1024 / 1024:g} MiB limit (--max-response-mib); it was not kept"
