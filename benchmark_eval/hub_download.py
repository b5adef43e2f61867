"""huggingface_hub's downloads of a release, bounded: no answer from HF_ENDPOINT may cost more than its bound.

huggingface_hub's own downloader reads a body until the server stops, so a broken or hostile endpoint could fill
the disk with an endless body, or hold a run for ever with a dripping one. While `bounded_hub_client` is open,
huggingface_hub talks through an httpx client (its `set_client_factory`) whose transport meters every body with
`mmbu.core.body_bounds`: a file at `/resolve/<commit>/<path>` (and wherever that answer redirects) may bring the
size the repository's tree listing states for it plus the toolkit's margin, at no less than the minimum rate and
within one deadline per file over huggingface_hub's resumed attempts; any other answer (a redirect's own body, the
API's JSON) is held to the JSON cap and the call deadline.
A breach raises `HubBodyRefused`, one sentence naming the file; huggingface_hub deletes its partial file on the
way out, so nothing half-written stays in its cache. Xet transfers (a separate client, outside these bounds) are
switched off meanwhile with huggingface_hub's own `HF_HUB_DISABLE_XET`; the Hub then serves plain HTTP.
"""
from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from urllib.parse import unquote, urljoin, urlsplit

import httpx2

from mmbu.core import body_bounds
from mmbu.core.body_bounds import BodyLimits, BodyMeter, BodyTooLong, BodyTooSlow, declared_size_bound

MIN_RATE_VARIABLE = "MMBU_HUB_MIN_BYTES_PER_SECOND"
RATE_WINDOW_VARIABLE = "MMBU_HUB_RATE_WINDOW"


class HubBodyRefused(Exception):
    """An answer went past its bound; the message is one sentence naming the file and what was seen."""


@dataclass(frozen=True)
class HubBounds:
    """The bounds of one release download (the toolkit's defaults; the rate ones can be set by environment)."""

    size_margin: float = body_bounds.SIZE_MARGIN
    min_bytes_per_second: float = body_bounds.MIN_BYTES_PER_SECOND
    rate_window: float = body_bounds.RATE_WINDOW
    file_deadline: float = body_bounds.FILE_DEADLINE
    call_deadline: float = body_bounds.CALL_DEADLINE
    max_json_bytes: int = body_bounds.MAX_JSON_BYTES

    @classmethod
    def from_environment(cls) -> HubBounds:
        """The defaults, with MMBU_HUB_MIN_BYTES_PER_SECOND and MMBU_HUB_RATE_WINDOW (seconds) when set."""
        values = {}
        for name, field_name in ((MIN_RATE_VARIABLE, "min_bytes_per_second"), (RATE_WINDOW_VARIABLE, "rate_window")):
            text = os.environ.get(name)
            if text:
                try:
                    values[field_name] = float(text)
                except ValueError:
                    raise ValueError(f"{name}={text!r} is not a number") from None
                if field_name == "rate_window" and values[field_name] <= 0:
                    raise ValueError(f"{name}={text!r} must be more than 0 seconds")
                if values[field_name] < 0:
                    raise ValueError(f"{name}={text!r} must be at least 0 (0: no minimum)")
        return cls(**values)


class _MeteredStream(httpx2.SyncByteStream):
    def __init__(self, inner: httpx2.SyncByteStream, meter: BodyMeter, shown: str) -> None:
        self._inner, self._meter, self._shown = inner, meter, shown

    def __iter__(self) -> Iterator[bytes]:
        for piece in self._inner:
            try:
                self._meter.count(len(piece))
            except (BodyTooLong, BodyTooSlow) as exc:
                raise HubBodyRefused(f"{self._shown}: {exc.detail}") from None
            yield piece

    def close(self) -> None:
        self._inner.close()


class _BoundedTransport(httpx2.BaseTransport):
    """Meters each answer's body; knows which file a URL brings from `/resolve/<commit>/<path>` and redirects."""

    def __init__(self, repo: str, sizes: dict[tuple[str, str], int | None], bounds: HubBounds) -> None:
        self._inner = httpx2.HTTPTransport()
        self._repo, self._sizes, self._bounds = repo, sizes, bounds
        self._redirected: dict[str, tuple[str, str]] = {}  # a redirect's target -> the (commit, path) it brings
        self._started: dict[tuple[str, str], float] = {}  # a file's first request: its deadline spans every retry

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        url = str(request.url)
        file = self._redirected.get(url) or self._file_of(request.url.path)
        response = self._inner.handle_request(request)
        if file and response.has_redirect_location:
            self._redirected[urljoin(url, response.headers["Location"])] = file
        if request.method == "HEAD":  # no body, whatever the headers say
            return response
        try:  # a redirect's body is read too (httpx does, before following): held to the API's bounds
            limits, shown = self._limits(None if response.has_redirect_location else file)
            stated = response.headers.get("Content-Length", "")
            if stated.isdigit() and int(stated) > limits.max_bytes:
                raise HubBodyRefused(f"{shown}: the answer states {int(stated):,} bytes, more than the "
                                     f"{limits.max_bytes:,} allowed; it was not kept")
        except HubBodyRefused:
            response.close()
            raise
        assert isinstance(response.stream, httpx2.SyncByteStream)
        return httpx2.Response(response.status_code, headers=response.headers, request=request,
                               extensions=response.extensions,
                               stream=_MeteredStream(response.stream, BodyMeter(limits), shown))

    def close(self) -> None:
        self._inner.close()

    def _file_of(self, path: str) -> tuple[str, str] | None:
        marker = f"/datasets/{self._repo}/resolve/"
        _, found, rest = unquote(path).partition(marker)
        if not found:
            return None
        commit, _, name = rest.partition("/")
        return commit, name

    def _limits(self, file: tuple[str, str] | None) -> tuple[BodyLimits, str]:
        bounds, now = self._bounds, time.monotonic()
        if file is None:
            return (BodyLimits(bounds.max_json_bytes, now + bounds.call_deadline, bounds.min_bytes_per_second,
                               bounds.rate_window), f"an answer from the Hub about {self._repo}")
        commit, name = file
        shown = f"hf://{self._repo}@{commit[:12]}/{name}"
        if file not in self._sizes:
            raise HubBodyRefused(f"{shown}: not in the repository's tree listing at that commit, so it has no size "
                                 "to bound it; it was not downloaded")
        size = self._sizes[file]
        if size is None:
            raise HubBodyRefused(f"{shown}: the repository's tree listing states no size for it; it was not "
                                 "downloaded")
        bound = declared_size_bound(size, bounds.size_margin)
        started = self._started.setdefault(file, now)
        return (BodyLimits(bound, started + bounds.file_deadline, bounds.min_bytes_per_second, bounds.rate_window),
                f"{shown} (listed at {size:,} bytes)")


@contextmanager
def bounded_hub_client(repo: str, bounds: HubBounds) -> Iterator[dict[tuple[str, str], int | None]]:
    """huggingface_hub's HTTP client bounded as the module says, until the block ends; then its default client
    and Xet switch again. The block fills the yielded {(commit, path): listed size} before any file is read."""
    import huggingface_hub
    from huggingface_hub import constants
    from huggingface_hub.utils import _http

    sizes: dict[tuple[str, str], int | None] = {}
    previous = getattr(_http, "_GLOBAL_CLIENT_FACTORY", _http.default_client_factory)
    xet_was_disabled = constants.HF_HUB_DISABLE_XET

    def factory() -> httpx2.Client:
        return httpx2.Client(event_hooks={"request": [_http.hf_request_event_hook]}, follow_redirects=True,
                             timeout=None, transport=_BoundedTransport(repo, sizes, bounds))

    huggingface_hub.set_client_factory(factory)
    constants.HF_HUB_DISABLE_XET = True
    try:
        yield sizes
    finally:
        constants.HF_HUB_DISABLE_XET = xet_was_disabled
        huggingface_hub.set_client_factory(previous)
