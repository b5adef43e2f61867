"""A real HTTP server on 127.0.0.1 for tests: scripted routes, recorded requests, Range support.

Routes are (method, path) -> handler. A handler is a `Reply` (served every time), a list of
replies (served in turn, the last one repeating), or a callable `Request -> Reply`.
Paths match exactly, or as a regular expression when they start with "^".
"""
from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body or b"null")

    def arg(self, name: str, default: str | None = None) -> str | None:
        return self.query.get(name, [default])[0]


@dataclass
class Reply:
    status: int = 200
    body: bytes | str | Any = b""
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    cut_after: int | None = None  # send this many body bytes, then drop the connection
    # a body sent piece by piece (no Content-Length; the connection closes after it): endless or dripping hosts
    chunks: Any = None  # an iterable of bytes
    chunk_delay: float = 0.0  # seconds between two pieces

    def payload(self) -> bytes:
        if isinstance(self.body, bytes):
            return self.body
        if isinstance(self.body, str):
            return self.body.encode()
        self.headers.setdefault("Content-Type", "application/json")
        return json.dumps(self.body).encode()


Handler = Reply | list[Reply] | Callable[[Request], Reply]


def file_with_range(data: bytes, etag: str | None = None, cut_first_at: int | None = None) -> Callable[[Request], Reply]:
    """Serve `data` honouring `Range: bytes=N-`; optionally drop the first full response after N bytes."""
    state = {"cut": cut_first_at}

    def handler(request: Request) -> Reply:
        headers = {"Accept-Ranges": "bytes", "Content-Type": "application/octet-stream"}
        if etag:
            headers["ETag"] = etag
        match = re.match(r"bytes=(\d+)-$", request.headers.get("range", ""))
        if match:
            start = int(match.group(1))
            if start >= len(data):
                return Reply(416, b"", {"Content-Range": f"bytes */{len(data)}"})
            headers["Content-Range"] = f"bytes {start}-{len(data) - 1}/{len(data)}"
            return Reply(206, data[start:], headers)
        cut, state["cut"] = state["cut"], None
        return Reply(200, data, headers, cut_after=cut)

    return handler


class LoopbackServer:
    def __init__(self) -> None:
        self.routes: list[tuple[str, str, Handler, list[int]]] = []
        self.requests: list[Request] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._make_handler())
        self._server.daemon_threads = True
        # a short poll interval keeps shutdown (once per test) from costing half a second
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02},
                                        daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def add(self, method: str, path: str, handler: Handler) -> None:
        """Register a route; later registrations of the same route take precedence."""
        self.routes.insert(0, (method.upper(), path, handler, [0]))

    def requests_to(self, path: str) -> list[Request]:
        return [r for r in self.requests if r.path == path]

    def start(self) -> LoopbackServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> LoopbackServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _dispatch(self, request: Request) -> Reply:
        for method, path, handler, calls in self.routes:
            if method != request.method:
                continue
            if path == request.path or (path.startswith("^") and re.match(path, request.path)):
                calls[0] += 1
                if callable(handler):
                    return handler(request)
                if isinstance(handler, list):
                    return handler[min(calls[0], len(handler)) - 1]
                return handler
        return Reply(404, {"message": f"no route for {request.method} {request.path}"})

    def _make_handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class _Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Headers and body go out as two writes; with Nagle on, the body waits for the client's delayed ACK
            # (~20-40 ms per reply on a kept-alive connection), which cost the discovery tests seconds each.
            disable_nagle_algorithm = True

            def log_message(self, *args: object) -> None:  # keep test output quiet
                pass

            def _serve(self) -> None:
                parts = urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                request = Request(
                    method=self.command,
                    path=parts.path,
                    query=parse_qs(parts.query, keep_blank_values=True),
                    headers={k.lower(): v for k, v in self.headers.items()},
                    body=self.rfile.read(length) if length else b"",
                )
                server.requests.append(request)
                reply = server._dispatch(request)
                if reply.delay:
                    time.sleep(reply.delay)
                if reply.chunks is not None:
                    self._send_pieces(reply)
                    return
                payload = reply.payload()
                self.send_response(reply.status)
                for key, value in reply.headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                if self.command == "HEAD":
                    return
                if reply.cut_after is not None:
                    self.wfile.write(payload[: reply.cut_after])
                    self.wfile.flush()
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                self.wfile.write(payload)

            def _send_pieces(self, reply: Reply) -> None:
                self.send_response(reply.status)
                for key, value in reply.headers.items():
                    self.send_header(key, value)
                self.send_header("Connection", "close")
                self.end_headers()
                self.close_connection = True
                try:
                    for piece in reply.chunks:
                        self.wfile.write(piece)
                        self.wfile.flush()
                        if reply.chunk_delay:
                            time.sleep(reply.chunk_delay)
                except OSError:  # the client hung up: what the bounded client is expected to do
                    pass

            do_GET = do_POST = do_HEAD = do_PUT = _serve

        return _Handler


def closed_port_url() -> str:
    """An address on this machine where nothing listens: a connection is refused at once (a host that is down)."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}"
