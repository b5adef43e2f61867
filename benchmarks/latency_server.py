"""A fixed-latency OpenAI-compatible endpoint that spends almost no CPU: the stand-in for a GPU server.

The runner benchmark asks "does the client keep C requests in flight, C / latency answers a second?".
A real model server runs on its own host, so none of its CPU is taken from the client. Here both
share one small machine, and the scripted test server (tests/support/openai_server.py, aiohttp web,
parses every body) spends ~0.2 ms of CPU per request, over half of what the runner itself spends,
which would make the benchmark partly measure the server. This one (~0.03 ms) parses HTTP/1.1 with
httptools (uvicorn's parser), reads each request body whole, checks that it looks like a
chat-completion request, and answers with a fixed completion `latency` seconds after the request
arrived (keep-alive; answers on one connection leave in request order).

``python benchmarks/latency_server.py --latency 0.05`` prints its base URL (``http://127.0.0.1:PORT/v1``).
"""
from __future__ import annotations

import argparse
import asyncio
import json

import httptools

COMPLETION = json.dumps({
    "id": "chatcmpl-bench", "object": "chat.completion", "created": 0, "model": "bench",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "A"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 100, "completion_tokens": 1, "total_tokens": 101},
}).encode()


def _response(status: str, body: bytes) -> bytes:
    return (f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
            .encode() + body)


OK = _response("200 OK", COMPLETION)
NOT_FOUND = _response("404 Not Found", b'{"error": {"message": "only POST /v1/chat/completions"}}')
NOT_CHAT = _response("400 Bad Request", b'{"error": {"message": "the body is not a chat-completion request"}}')


class _Connection(asyncio.Protocol):
    def __init__(self, latency: float) -> None:
        self.latency = latency
        self.parser = httptools.HttpRequestParser(self)
        self.transport: asyncio.Transport | None = None
        self.url = b""
        self.body: list[bytes] = []
        self.replies: list[list[bytes | None]] = []   # in request order: HTTP/1.1 answers in order

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError:
            self.transport.close()

    # httptools callbacks
    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        body, url, self.body, self.url = b"".join(self.body), self.url, [], b""
        ok = url.endswith(b"/chat/completions") and self.parser.get_method() == b"POST"
        # A cheap shape check, not a JSON parse: the body names a model and carries messages.
        answer = (OK if b'"messages"' in body and b'"model"' in body else NOT_CHAT) if ok else NOT_FOUND
        slot: list[bytes | None] = [None]
        self.replies.append(slot)
        asyncio.get_running_loop().call_later(self.latency, self._ready, slot, answer)

    def _ready(self, slot: list[bytes | None], answer: bytes) -> None:
        slot[0] = answer
        while self.replies and self.replies[0][0] is not None:
            if not self.transport.is_closing():
                self.transport.write(self.replies.pop(0)[0])
            else:
                self.replies.pop(0)


async def serve(latency: float, host: str = "127.0.0.1", port: int = 0) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: _Connection(latency), host, port)
    print(f"http://{host}:{server.sockets[0].getsockname()[1]}/v1", flush=True)
    async with server:
        await server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.05, help="seconds from request to answer")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    try:
        import uvloop  # the stand-in should take as little of the shared CPU as it can
    except ImportError:
        uvloop = None
    try:
        if uvloop is not None:
            uvloop.run(serve(args.latency, port=args.port))
        else:
            asyncio.run(serve(args.latency, port=args.port))
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
