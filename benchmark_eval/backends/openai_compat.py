"""An async client for OpenAI-compatible chat servers (vLLM, SGLang, LMDeploy, TGI, hosted APIs).

Used by the runner for the model under test and by the judge. What it guarantees:

* several base URLs share the load (each request goes to the one with the fewest in flight);
* a per-request timeout; retries with jittered exponential backoff (tenacity) on 429, 5xx,
  timeouts and dropped connections, honouring ``Retry-After``;
* an adaptive concurrency limit: ×0.8 per episode of 429s, creeping back up on success;
  5xx do not shrink it (:mod:`.limiter`);
* an empty answer or an API refusal comes back as such in :class:`ChatResult` (never retried
  forever, never turned into answer text); a request that cannot be answered raises
  :class:`BackendError` with a one-word reason;
* the API key is read from an environment variable named by the caller and is never logged,
  written, or shown in ``repr``;
* a circuit breaker: after ``max_consecutive_failures`` requests in a row ended in a transport
  failure or a 5xx (each after its retries), every call raises :class:`CircuitOpen` carrying the
  first of them verbatim, so a server that died stops the run instead of failing every request.

Base URLs follow the OpenAI SDK convention and include the version prefix:
``http://host:8000/v1`` → ``POST http://host:8000/v1/chat/completions``.
"""
from __future__ import annotations

import asyncio
import os
import re
import time
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp
import orjson
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt
from tenacity.wait import wait_random_exponential

from mmbu.benchmark_eval.backends.base import Backend, BackendError, ChatResult, ModelRequest, chat_messages
from mmbu.benchmark_eval.backends.bounded_body import (DEFAULT_MAX_RESPONSE_BYTES, DEFAULT_MIN_RESPONSE_RATE,
                                                       ResponseTooLarge, ResponseTooSlow, read_bounded_body)
from mmbu.benchmark_eval.backends.limiter import AdaptiveConcurrency
from mmbu.benchmark_eval.models.registry import ChatQuirks
from mmbu.core.chat import chat_body, chat_url, read_chat_answer
from mmbu.core.retry_after import retry_after_seconds
from mmbu.core.secrets import has_userinfo, redact_secrets, redact_url

DEFAULT_API_KEY_ENV = "OPENAI_API_KEY"
DEFAULT_MAX_CONSECUTIVE_FAILURES = 20
# A request that ended so (after its retries) says the endpoint, not the request, is failing.
ENDPOINT_FAILURES = {"connection_error", "timeout", "server_error"}
RETRYABLE_REASONS = {"timeout", "rate_limited", "server_error", "connection_error", "bad_response"}
_TOO_LONG = re.compile(r"maximum context length|longer than the maximum|max_model_len|too many tokens|context length|prompt is too long", re.I)


class _Attempt(Exception):
    """One failed attempt; carries the reason and an optional server-requested wait."""

    def __init__(self, reason: str, message: str, status_code: int | None = None, retry_after: float | None = None):
        super().__init__(message)
        self.reason, self.status_code, self.retry_after = reason, status_code, retry_after
        self.attempts = 1


class _WaitHonouringRetryAfter:
    """Jittered exponential backoff, but never shorter than what the server asked for."""

    def __init__(self, multiplier: float, maximum: float) -> None:
        self._backoff = wait_random_exponential(multiplier=multiplier, max=maximum)
        self._maximum = maximum

    def __call__(self, state: RetryCallState) -> float:
        backoff = self._backoff(state)
        exc = state.outcome.exception() if state.outcome else None
        if isinstance(exc, _Attempt) and exc.retry_after is not None:
            # Honour the server's wait (capped so a silly header cannot stall a run) plus a little jitter.
            return min(exc.retry_after, self._maximum) + backoff * 0.1
        return backoff


class CircuitOpen(Exception):
    """Too many requests in a row failed in transport or with a 5xx: the endpoint is down, stop asking it."""


class CircuitBreaker:
    """Counts requests that ended in an endpoint failure in a row; any other outcome resets the count.

    `limit` None or 0 never opens. Once open it stays open: the message names the count and quotes the first
    failure of the streak as the client recorded it (server message included, credentials masked).
    """

    def __init__(self, limit: int | None) -> None:
        self.limit = limit or None
        self.streak = 0
        self.first_failure: str | None = None
        self.message: str | None = None

    @property
    def open(self) -> bool:
        return self.message is not None

    def succeeded(self) -> None:
        self.streak, self.first_failure = 0, None

    def failed(self, reason: str, error: str) -> None:
        if reason not in ENDPOINT_FAILURES:
            self.succeeded()  # the endpoint answered; this request was the problem
            return
        self.streak += 1
        self.first_failure = self.first_failure or error
        if self.limit and self.streak >= self.limit and self.message is None:
            self.message = (f"{self.streak} requests in a row failed (transport errors or HTTP 5xx, each after its "
                            f"retries); the first: {self.first_failure}")

    def check(self) -> None:
        if self.message is not None:
            raise CircuitOpen(self.message)


def read_api_key(env_name: str | None) -> str | None:
    """The key from the named environment variable (None when unset: local servers need none)."""
    if not env_name:
        return None
    value = os.environ.get(env_name)
    return value or None


@dataclass(frozen=True)
class HttpAnswer:
    """One HTTP response, read whole (the connection is back in the pool once this exists)."""

    status_code: int
    headers: Mapping[str, str]
    body: bytes | bytearray

    def json(self) -> Any:
        return orjson.loads(self.body)

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", "replace")


class OpenAICompatClient:
    """``await client.chat(messages, ...)`` against one or more OpenAI-compatible base URLs.

    The HTTP layer is aiohttp: at hundreds of requests in flight it costs about a third of the CPU
    per request that httpx does (benchmarks/RESULTS.md, "Eval runner"), and on a shared machine
    that CPU is what separates the runner from ``concurrency / latency``. One pooled session per
    event loop, opened on the first request (a session belongs to the loop that made it).
    """

    def __init__(
        self,
        base_urls: str | Sequence[str],
        model: str,
        *,
        api_key_env: str | None = DEFAULT_API_KEY_ENV,
        concurrency: int = 16,
        timeout_s: float = 120.0,
        max_attempts: int = 6,
        backoff_s: float = 1.0,
        backoff_max_s: float = 60.0,
        rate_limit_cooldown_s: float = 5.0,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        max_consecutive_failures: int | None = DEFAULT_MAX_CONSECUTIVE_FAILURES,
        min_response_rate: float = DEFAULT_MIN_RESPONSE_RATE,
    ) -> None:
        urls = [base_urls] if isinstance(base_urls, str) else list(base_urls)
        if not urls:
            raise ValueError("at least one base URL is needed")
        for url in urls:
            if has_userinfo(url):  # it would be sent, logged and written into run.json
                raise ValueError(f"the base URL {redact_url(url)} carries credentials (user:key@); give the key in an "
                                 "environment variable named by --api-key-env instead")
        self.max_response_bytes = max_response_bytes
        self.min_response_rate = min_response_rate
        self.base_urls = [u.rstrip("/") for u in urls]
        self.model = model
        self.timeout_s = timeout_s
        self.max_attempts = max_attempts
        self.limiter = AdaptiveConcurrency(concurrency, cooldown_s=rate_limit_cooldown_s)
        self._wait = _WaitHonouringRetryAfter(backoff_s, backoff_max_s)
        self._in_flight = {url: 0 for url in self.base_urls}
        self._endpoints = {url: chat_url(url) for url in self.base_urls}
        self._next = 0
        self.counters = {"ok": 0, "retries": 0, "rate_limited": 0, "server_error": 0, "timeout": 0}
        self.breaker = CircuitBreaker(max_consecutive_failures)
        self.reported_models: set[str] = set()  # the `model` field of the answers: what the server says it ran
        # Only encodings `_read_body` inflates within its bound (aiohttp would inflate any size, and brotli).
        self._headers = {"Content-Type": "application/json", "Accept-Encoding": "gzip, deflate"}
        key = read_api_key(api_key_env)
        self._secrets = (key,)  # redacted from every error text a server sends back
        if key:
            self._headers["Authorization"] = f"Bearer {key}"
        self._connections = concurrency + 8  # the limiter keeps at most `concurrency` in flight
        self._session: aiohttp.ClientSession | None = None
        self._session_loop: asyncio.AbstractEventLoop | None = None
        # Proxies from HTTP(S)_PROXY / NO_PROXY, as httpx and the OpenAI SDK honour them, read once:
        # aiohttp's own trust_env looks them (and ~/.netrc) up in a worker thread for every request.
        self._proxies = {url: env_proxy(url) for url in self.base_urls}

    def __repr__(self) -> str:  # no headers, so never the key
        return f"OpenAICompatClient(base_urls={self.base_urls!r}, model={self.model!r})"

    async def __aenter__(self) -> OpenAICompatClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        session, self._session = self._session, None
        if session is not None and self._session_loop is asyncio.get_running_loop():
            await session.close()

    def _http(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        if self._session is None or self._session.closed or self._session_loop is not loop:
            # A session left from an earlier event loop cannot be closed from this one; it holds no
            # live connections once its loop has ended.
            connector = aiohttp.TCPConnector(limit=self._connections, ttl_dns_cache=300)
            self._session = aiohttp.ClientSession(connector=connector, headers=self._headers, auto_decompress=False)
            self._session_loop = loop
        return self._session

    def _pick_url(self) -> str:
        # Least outstanding requests; ties broken round-robin so idle servers share evenly.
        order = self.base_urls[self._next:] + self.base_urls[: self._next]
        self._next = (self._next + 1) % len(self.base_urls)
        return min(order, key=lambda url: self._in_flight[url])

    async def chat(
        self,
        messages: list[dict[str, Any]],
        *,
        temperature: float | None = 0.0,
        max_tokens: int = 512,
        seed: int | None = 0,
        timeout: float | None = None,
        extra_body: dict[str, Any] | None = None,
        max_tokens_field: str = "max_tokens",
    ) -> ChatResult:
        """One chat completion. Raises :class:`BackendError` when no answer could be had, :class:`CircuitOpen`
        once the circuit breaker has opened.

        ``temperature=None`` / ``seed=None`` leave the field out (APIs that refuse it);
        ``max_tokens_field`` is ``max_completion_tokens`` for OpenAI's reasoning models.
        """
        body = chat_body(self.model, messages, max_tokens=max_tokens, max_tokens_field=max_tokens_field,
                         temperature=temperature, seed=seed, extra=extra_body)
        payload = orjson.dumps(body)  # ~40x json's time on a body carrying a base64 image
        started = time.monotonic()
        self.breaker.check()
        try:
            try:
                # Most requests succeed at once; tenacity's bookkeeping (~0.06 ms) is paid only by the rest.
                result, attempts = await self._attempt(payload, timeout or self.timeout_s), 1
            except _Attempt as first:
                result, attempts = await self._retry(payload, timeout or self.timeout_s, first)
        except _Attempt as exc:
            attempts = exc.attempts
            message = f"{exc} (after {attempts} attempt{'s' * (attempts > 1)})"
            self.breaker.failed(exc.reason, message)
            self.breaker.check()
            raise BackendError(exc.reason, message, attempts=attempts, latency_s=time.monotonic() - started,
                               status_code=exc.status_code) from None
        result.attempts = attempts
        result.latency_s = time.monotonic() - started
        self.counters["ok"] += 1
        self.breaker.succeeded()
        if result.model is not None:
            self.reported_models.add(result.model)
        return result

    async def _retry(self, payload: bytes, timeout: float, first: _Attempt) -> tuple[ChatResult, int]:
        """Attempts 2.. after `first` failed: tenacity decides, waits (jittered, honouring Retry-After), stops."""
        attempts, replay = 1, first
        retrying = AsyncRetrying(
            stop=stop_after_attempt(self.max_attempts),
            wait=self._wait,
            retry=retry_if_exception(lambda e: isinstance(e, _Attempt) and e.reason in RETRYABLE_REASONS),
            reraise=True,
        )
        try:
            async for attempt in retrying:
                with attempt:
                    if replay is not None:  # tenacity's attempt 1 is the one already made
                        failed, replay = replay, None
                        raise failed
                    attempts += 1
                    self.counters["retries"] += 1
                    result = await self._attempt(payload, timeout)
        except _Attempt as exc:
            exc.attempts = attempts
            raise
        return result, attempts

    async def _post(self, url: str, payload: bytes, timeout: float) -> HttpAnswer:
        async with self._http().post(self._endpoints[url], data=payload, proxy=self._proxies[url],
                                     timeout=aiohttp.ClientTimeout(total=timeout)) as response:
            body = await read_bounded_body(response, self.max_response_bytes, url, self.min_response_rate)
            return HttpAnswer(response.status, response.headers, body)

    def _error_text(self, response: HttpAnswer) -> str:
        """The server's error message, with the key and anything shaped like a credential masked: a proxy may
        echo the request's Authorization header into its error page."""
        return redact_secrets(_error_text(response), self._secrets)

    async def _attempt(self, payload: bytes, timeout: float) -> ChatResult:
        self.breaker.check()  # a request waiting to retry stops as soon as the breaker opens
        async with self.limiter:
            url = self._pick_url()
            self._in_flight[url] += 1
            sent = time.monotonic()
            try:
                response = await self._post(url, payload, timeout)
            except TimeoutError:  # the whole exchange, or aiohttp's connect/read timeouts (its subclasses)
                self.counters["timeout"] += 1
                raise _Attempt("timeout", f"{url}: no answer within {timeout:g} s") from None
            except (aiohttp.ClientError, OSError) as exc:  # refused, reset, dropped mid-answer, not HTTP
                raise _Attempt("connection_error", f"{url}: {redact_secrets(_describe(exc), self._secrets)}") from None
            except ResponseTooLarge as exc:
                raise _Attempt("response_too_large", str(exc)) from None
            except ResponseTooSlow as exc:  # a drip: as good as no answer in time
                self.counters["timeout"] += 1
                raise _Attempt("timeout", str(exc)) from None
            finally:
                self._in_flight[url] -= 1
            latency = time.monotonic() - sent
            if response.status_code == 429:
                self.counters["rate_limited"] += 1
                self.limiter.on_rate_limited()
                raise _Attempt("rate_limited", f"{url}: HTTP 429 rate limited", 429,
                               retry_after_seconds(response.headers.get("retry-after")))
            if response.status_code >= 500 or response.status_code == 408:
                self.counters["server_error"] += 1
                raise _Attempt("server_error", f"{url}: HTTP {response.status_code} {self._error_text(response)}",
                               response.status_code, retry_after_seconds(response.headers.get("retry-after")))
            if response.status_code >= 400:
                text = self._error_text(response)
                if response.status_code == 413:
                    reason = "image_too_large"
                elif _TOO_LONG.search(text):
                    reason = "prompt_too_long"
                else:
                    reason = "bad_request"
                raise _Attempt(reason, f"{url}: HTTP {response.status_code} {text}", response.status_code)
            result = parse_chat_completion(response, url, self._secrets)
            result.latency_s = latency
            self.limiter.on_success()
            return result


def env_proxy(url: str) -> str | None:
    """The proxy that HTTP_PROXY / HTTPS_PROXY / NO_PROXY (or the OS settings) name for `url`, if any."""
    parts = urllib.parse.urlsplit(url)
    proxy = urllib.request.getproxies().get(parts.scheme)
    if not proxy or urllib.request.proxy_bypass(parts.netloc):
        return None
    return proxy


def _describe(exc: BaseException) -> str:
    cause = exc.__cause__ or exc
    text = " ".join(str(cause).split())  # aiohttp's payload errors span lines; a record holds one
    return f"{type(cause).__name__}: {text}".rstrip(": ")


def _error_text(response: HttpAnswer) -> str:
    """The server's own error message, short; never request headers."""
    try:
        payload = response.json()
    except ValueError:
        return response.text[:300].strip()
    if isinstance(payload, dict):
        error = payload.get("error", payload)
        if isinstance(error, dict):
            return str(error.get("message") or error)[:300]
        return str(error)[:300]
    return str(payload)[:300]


def parse_chat_completion(response: HttpAnswer, url: str = "", secrets: tuple[str | None, ...] = ()) -> ChatResult:
    """A :class:`ChatResult` from an OpenAI chat-completion body, read by `mmbu.core.chat` (valid JSON of the wrong
    shape is as malformed as invalid JSON); a malformed body is this request's `bad_response`, never an exception
    that ends the run."""
    def malformed(what: str) -> _Attempt:
        return _Attempt("bad_response", f"{url}: HTTP {response.status_code} body is not a chat completion ({what}): "
                        f"{redact_secrets(response.text[:120], secrets)!r}", response.status_code)

    try:
        payload = response.json()
    except ValueError:
        raise malformed("not JSON") from None
    try:
        answer = read_chat_answer(payload)
    except ValueError as exc:
        raise malformed(str(exc)) from None
    return ChatResult(
        text=redact_secrets(answer.text, secrets) if answer.text and any(secrets) else answer.text,
        finish_reason=answer.finish_reason, usage=answer.usage, refusal=answer.refusal, reasoning=answer.reasoning,
        model=answer.model,
    )


class OpenAICompatBackend(Backend):
    """The model under test behind an OpenAI-compatible server, honouring the registry's chat quirks."""

    name = "openai"

    def __init__(self, client: OpenAICompatClient, quirks: ChatQuirks | None = None, *,
                 extra_body: dict[str, Any] | None = None) -> None:
        self.client = client
        self.quirks = quirks or ChatQuirks()
        self.extra_body = extra_body

    def build_messages(self, request: ModelRequest) -> list[dict[str, Any]]:
        url = orjson.Fragment(request.image_url_json) if request.image_url_json is not None else None
        return chat_messages(request, system_prompt_supported=self.quirks.system_prompt, image_url=url)

    async def generate(self, request: ModelRequest) -> ChatResult:
        return await self.client.chat(
            self.build_messages(request),
            temperature=request.temperature if self.quirks.temperature else None,
            max_tokens=request.max_tokens,
            seed=request.seed if self.quirks.seed else None,
            extra_body=self.extra_body,
            max_tokens_field=self.quirks.max_tokens_field,
        )

    async def aclose(self) -> None:
        await self.client.aclose()

    def describe(self) -> dict[str, Any]:
        return {"backend": self.name, "base_urls": [redact_url(url) for url in self.client.base_urls],
                "served_model": self.client.model,
                "timeout_s": self.client.timeout_s, "max_attempts": self.client.max_attempts,
                "max_concurrency": self.client.limiter.maximum}
