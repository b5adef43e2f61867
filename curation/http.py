"""The one polite HTTP client of the toolkit: every discovery search and every dataset download goes through it.

Per host (a `HostPolicy`, plain data): one request in flight at a time, a proactive rate cap (token bucket),
connect/read timeouts, jittered exponential backoff (tenacity) on 429/5xx and connection/read errors that
honours the server's own hints (`Retry-After` as seconds or HTTP date, Hugging Face's `RateLimit: "api";r=..;t=..`,
`X-RateLimit-Reset` epoch), and a circuit breaker that opens on 403 / "You are being blocked" so we stop
hammering a host that has asked us to stop. Every request carries an identifying User-Agent.

Credentials never leave the request: they are not part of cache keys or cache files, and any token the
session has seen is masked in error messages and logs.

    session = PoliteSession(cache_dir=Path("cache/http"))
    records = session.get_json("https://zenodo.org/api/records", params={"q": "chest x-ray"})
    with session.stream(url, headers={"Range": "bytes=100-"}) as response:
        for chunk in response.iter_content(1 << 20): ...
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import requests
import tenacity
import urllib3
from pydantic import BaseModel, ConfigDict, Field

from mmbu.core import body_bounds
from mmbu.core.body_bounds import BodyLimits, BodyMeter, BodyTooLong, BodyTooSlow, declared_size_bound
from mmbu.core.files import write_text_atomic
from mmbu.core.retry_after import retry_after_seconds
from mmbu.core.version import toolkit_version
from mmbu.core.yaml_io import read_yaml
from mmbu.core.secrets import SENSITIVE_PARAM, redact_url

log = logging.getLogger("mmbu.http")


USER_AGENT = f"mmbu/{toolkit_version()} (+https://github.com/mmbu-benchmark/mmbu)"

BLOCKED_MARKER = "you are being blocked"


class HostPolicy(BaseModel):
    """How politely to treat one host. Data, so tests and config files can pass their own."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    requests_per_second: float = Field(1.0, gt=0, description="Proactive rate cap (token bucket refill rate).")
    burst: int = Field(1, ge=1, description="Requests that may go out back to back before the cap applies.")
    connect_timeout: float = Field(10.0, gt=0)
    read_timeout: float = Field(60.0, gt=0)
    max_attempts: int = Field(5, ge=1, description="Attempts per request, the first one included.")
    backoff_base: float = Field(1.0, ge=0, description="Initial window of the full-jitter exponential backoff.")
    backoff_max: float = Field(60.0, ge=0, description="Upper bound of one jittered backoff wait.")
    max_server_wait: float = Field(
        300.0, ge=0, description="Longest server-requested wait we honour; a longer one fails the request at once."
    )
    retry_statuses: frozenset[int] = frozenset({429, 500, 502, 503, 504})
    block_statuses: frozenset[int] = frozenset({403})
    low_remaining: int = Field(
        1, ge=0, description="When X-RateLimit-Remaining drops to this, pause the host until X-RateLimit-Reset."
    )
    # Bounds on what a host may cost (a hostile or broken host would otherwise decide): see `BodyLimits`.
    min_bytes_per_second: float = Field(
        body_bounds.MIN_BYTES_PER_SECOND, ge=0,
        description="A body arriving slower than this, averaged over `rate_window` seconds, is cut "
                    "(0: no minimum; `read_timeout` still bounds a silent host).")
    rate_window: float = Field(body_bounds.RATE_WINDOW, gt=0,
                               description="Seconds over which the minimum rate is averaged.")
    file_deadline: float = Field(
        body_bounds.FILE_DEADLINE, gt=0,
        description="Seconds one file's download may take in all, resumed attempts included.")
    call_deadline: float = Field(body_bounds.CALL_DEADLINE, gt=0,
                                 description="Seconds one API call (a JSON answer) may take in all.")
    max_json_bytes: int = Field(
        body_bounds.MAX_JSON_BYTES, gt=0,
        description="Largest JSON answer accepted, counted after gzip/deflate inflation.")
    size_margin: float = Field(
        body_bounds.SIZE_MARGIN, ge=0,
        description="A download may exceed the size its host, manifest or lock declares by this "
                    "fraction plus 1 MiB before it is cut; beyond, the file is refused.")
    max_undeclared_bytes: int = Field(
        500 * 1024**3, gt=0, description="Largest download whose size nobody declares (what archives may expand to).")


# Defaults from the published/observed limits (reference/discovery-apis.md §1.6, §2.6, §5.2).
DEFAULT_POLICIES: dict[str, HostPolicy] = {
    "zenodo.org": HostPolicy(requests_per_second=0.4),
    "huggingface.co": HostPolicy(requests_per_second=1.0),
    "api.kaggle.com": HostPolicy(requests_per_second=0.5),
    "www.kaggle.com": HostPolicy(requests_per_second=0.5),
}
DEFAULT_POLICY = HostPolicy()


def load_policies(path: Path) -> tuple[dict[str, HostPolicy], HostPolicy]:
    """Read host policies from YAML: `{host: {field: value}}`, where the host `"*"` sets the default.

    Hosts not in the file keep the built-in defaults. Raises ValueError naming the file and the field.
    """
    import yaml
    from pydantic import ValidationError

    try:
        document = read_yaml(path) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ValueError(f"{path}: cannot read host policies ({exc})") from None
    if not isinstance(document, dict):
        raise ValueError(f"{path}: expected a mapping of host names to policies")
    policies = dict(DEFAULT_POLICIES)
    default = DEFAULT_POLICY
    for host, fields in document.items():
        try:
            policy = HostPolicy.model_validate(fields or {})
        except ValidationError as exc:
            first = exc.errors()[0]
            raise ValueError(f"{path}: host {host}: field {'.'.join(map(str, first['loc']))}: {first['msg']}") from None
        if host == "*":
            default = policy
        else:
            policies[str(host)] = policy
    return policies, default


POLICIES_ENV = "MMBU_HTTP_POLICIES"


def configured_policies(path: Path | None = None) -> tuple[dict[str, HostPolicy] | None, HostPolicy | None]:
    """The host policies of `path`, else of the file `$MMBU_HTTP_POLICIES` names (so that `mmbu build`, which
    fetches too, is tuned like `mmbu fetch --http-policies`), else `(None, None)`: the built-in defaults.
    Raises ValueError naming the file and the field."""
    path = path or (Path(os.environ[POLICIES_ENV]) if os.environ.get(POLICIES_ENV) else None)
    if path is None:
        return None, None
    return load_policies(path)


def configured_session(path: Path | None = None) -> "PoliteSession":
    """A `PoliteSession` with `configured_policies(path)`."""
    policies, default = configured_policies(path)
    return PoliteSession(policies, default_policy=default or DEFAULT_POLICY)


# ---------------------------------------------------------------------------------------------------------------
# Errors

class HttpError(Exception):
    """A request failed for good. `status` is the HTTP status, or None when no response came back."""

    def __init__(self, url: str, status: int | None, detail: str) -> None:
        self.url = url
        self.status = status
        self.detail = detail
        where = f"HTTP {status}" if status is not None else "request failed"
        super().__init__(f"{where} for {url}: {detail}")


class BlockedError(HttpError):
    """The host refused us (403 or "You are being blocked"); the session sends it nothing more."""


class NotJsonError(HttpError):
    """The host answered with something other than JSON (often an HTML error or login page)."""


class TransportError(HttpError):
    """No usable response: connection refused or reset, or a connect/read timeout."""


class BodyTooLarge(HttpError):
    """A body went past its bound: the size a host or the lock declared (plus the margin), or `max_json_bytes`."""


class TooSlow(HttpError):
    """A body arrived slower than `min_bytes_per_second`, or past its deadline."""


def size_bound(declared: int | None, policy: HostPolicy) -> int:
    """The most bytes a download declared as `declared` bytes (None: nobody says) may bring."""
    if declared is None:
        return policy.max_undeclared_bytes
    return declared_size_bound(declared, policy.size_margin)


def bounded_chunks(response: requests.Response, limits: BodyLimits, shown: str, *,
                   decode: bool = False, chunk: int = 1 << 16) -> Iterator[bytes]:
    """The body of `response` chunk by chunk (inflated when `decode`), within `limits`, else BodyTooLarge or TooSlow.

    Reads with urllib3's `read1`, which returns what one receive brought: a host dripping a byte a second is seen
    after each byte (a plain `read(n)` waits for all n bytes, each receive within the read timeout, for ever).
    Inflation is bounded by `chunk` per read (urllib3 decompresses at most what was asked for), so a gzip bomb
    costs `max_bytes`, never its inflated size. Connection errors reach the caller as urllib3 raises them.
    """
    meter = BodyMeter(limits)
    while True:
        data = response.raw.read1(chunk, decode_content=decode)
        if not data:
            return
        try:
            meter.count(len(data))
        except BodyTooLong as exc:
            raise BodyTooLarge(shown, response.status_code, exc.detail) from None
        except BodyTooSlow as exc:
            raise TooSlow(shown, response.status_code, exc.detail) from None
        yield data


class _Retryable(Exception):
    """Internal: one attempt failed in a way worth retrying; `server_wait` is what the server asked for."""

    def __init__(self, error: HttpError, server_wait: float | None = None) -> None:
        super().__init__(str(error))
        self.error = error
        self.server_wait = server_wait


# ---------------------------------------------------------------------------------------------------------------
# Server wait hints

def server_wait_seconds(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """The longest wait the server's rate-limit headers ask for (Retry-After, RateLimit t=, X-RateLimit-Reset)."""
    now = time.time() if now is None else now
    waits: list[float] = []
    retry_after = retry_after_seconds(headers.get("Retry-After"), now)
    if retry_after is not None:
        waits.append(retry_after)
    ietf = re.search(r"(?:^|;)\s*t=(\d+(?:\.\d+)?)", headers.get("RateLimit", ""))
    if ietf:
        waits.append(float(ietf.group(1)))
    reset = headers.get("X-RateLimit-Reset")
    if reset:
        try:
            waits.append(max(0.0, float(reset) - now))
        except ValueError:
            pass
    return max(waits) if waits else None


# ---------------------------------------------------------------------------------------------------------------
# Redaction and cache keys

def _public_params(params: Mapping[str, Any] | None) -> dict[str, Any]:
    return {k: ("***" if SENSITIVE_PARAM.search(k) else v) for k, v in (params or {}).items()}


def cache_key(method: str, url: str, params: Mapping[str, Any] | None = None, body: Any = None) -> str:
    """A stable key for a request from what identifies it publicly (never headers, never secret params)."""
    canonical = json.dumps(
        {"method": method.upper(), "url": redact_url(url), "params": _public_params(params), "body": body},
        sort_keys=True, default=str,
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


# ---------------------------------------------------------------------------------------------------------------
# Per-host state

@dataclass
class _HostState:
    policy: HostPolicy
    lock: threading.RLock = field(default_factory=threading.RLock)
    tokens: float = 0.0
    refilled_at: float = field(default_factory=time.monotonic)
    not_before: float = 0.0  # monotonic time before which nothing goes to this host
    blocked: str | None = None

    def __post_init__(self) -> None:
        self.tokens = float(self.policy.burst)

    def wait_for_slot(self, sleep: Callable[[float], None]) -> None:
        """Block (holding the host lock) until the server's pause is over and the token bucket has a token."""
        while True:
            now = time.monotonic()
            refill = (now - self.refilled_at) * self.policy.requests_per_second
            self.tokens = min(self.policy.burst, self.tokens + refill)
            self.refilled_at = now
            pause = max(self.not_before - now, (1 - self.tokens) / self.policy.requests_per_second)
            if pause <= 0:
                self.tokens -= 1
                return
            sleep(pause)

    def pause_for(self, seconds: float) -> None:
        self.not_before = max(self.not_before, time.monotonic() + seconds)


@dataclass
class JsonResponse:
    """A decoded JSON answer with the headers callers need for pagination (`Link`, `ETag`)."""

    data: Any
    status: int
    url: str
    headers: dict[str, str]
    from_cache: bool = False


_KEPT_HEADERS = ("Content-Type", "ETag", "Link", "Last-Modified")
_parse_json = json.loads  # `request_json` has a parameter named json (the request's body)


# ---------------------------------------------------------------------------------------------------------------

class PoliteSession:
    """One shared, polite HTTP client.

    policies: host name (or host:port) -> HostPolicy; hosts not listed get `default_policy`.
    cache_dir: when set, raw JSON answers of `get_json`/`post_json` are kept there, keyed by
        (method, url, params, body), and served again without a request (reproducible discovery runs).
    cache_ttl: seconds a cached answer stays valid; None keeps it forever.
    """

    def __init__(
        self,
        policies: Mapping[str, HostPolicy] | None = None,
        cache_dir: Path | None = None,
        *,
        default_policy: HostPolicy = DEFAULT_POLICY,
        user_agent: str = USER_AGENT,
        cache_ttl: float | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.policies = dict(DEFAULT_POLICIES if policies is None else policies)
        self.default_policy = default_policy
        self.user_agent = user_agent
        self.cache_dir = Path(cache_dir) if cache_dir else None
        self.cache_ttl = cache_ttl
        self._sleep = sleep
        self._hosts: dict[str, _HostState] = {}
        self._hosts_lock = threading.Lock()
        self._secrets: set[str] = set()
        self._local = threading.local()

    # -- public API ----------------------------------------------------------------------------------------------

    def get_json(self, url: str, params: Mapping[str, Any] | None = None, **kwargs: Any) -> Any:
        """GET and decode JSON. Raises HttpError, BlockedError, NotJsonError, TransportError."""
        return self.request_json("GET", url, params=params, **kwargs).data

    def post_json(self, url: str, json: Any = None, params: Mapping[str, Any] | None = None, **kwargs: Any) -> Any:
        """POST a JSON body and decode the JSON answer (retried like GET: Kaggle's list API is a POST)."""
        return self.request_json("POST", url, params=params, json=json, **kwargs).data

    def request_json(
        self,
        method: str,
        url: str,
        *,
        params: Mapping[str, Any] | None = None,
        json: Any = None,
        headers: Mapping[str, str] | None = None,
        auth: tuple[str, str] | None = None,
        use_cache: bool = True,
    ) -> JsonResponse:
        """Send one JSON request (through the cache when enabled) and return data plus useful headers."""
        key = cache_key(method, url, params, json)
        if use_cache and (cached := self._cache_read(key)) is not None:
            return cached
        request_headers = {"Accept": "application/json", **(headers or {})}
        policy = self.host_policy(url)
        started = time.monotonic()
        with self.stream(url, headers=request_headers, auth=auth, params=params, method=method, json=json) as response:
            shown = redact_url(response.url)
            content_type = response.headers.get("Content-Type", "")
            limits = BodyLimits(policy.max_json_bytes, started + policy.call_deadline, policy.min_bytes_per_second,
                                policy.rate_window)
            try:
                body = b"".join(bounded_chunks(response, limits, shown, decode=True))
            except (urllib3.exceptions.HTTPError, OSError) as exc:
                raise TransportError(shown, response.status_code, f"the answer broke off ({type(exc).__name__})") from None
            try:
                data = _parse_json(body)
            except ValueError:
                start = self._redact(body[:80].decode("utf-8", "replace").strip())
                got = content_type or "no content type"
                raise NotJsonError(shown, response.status_code, f"expected JSON but got {got} ({start!r}...)") from None
            except RecursionError:
                raise NotJsonError(shown, response.status_code, "the JSON answer is nested too deeply to read") from None
            kept = {name: response.headers[name] for name in _KEPT_HEADERS if name in response.headers}
            result = JsonResponse(data, response.status_code, shown, kept)
        if use_cache and self.cache_dir is not None:
            self._cache_write(key, method, url, params, json, result)
        return result

    @contextmanager
    def stream(
        self,
        url: str,
        headers: Mapping[str, str] | None = None,
        auth: tuple[str, str] | None = None,
        params: Mapping[str, Any] | None = None,
        *,
        method: str = "GET",
        json: Any = None,
    ) -> Iterator[requests.Response]:
        """Open `url` for streaming (downloads); redirects are followed. The host stays reserved until the
        block exits.

        Retries cover getting a good status line; a connection cut while reading the body is the caller's
        to resume (with a Range header). `method`/`json` serve APIs that answer a POST with a redirect to
        the file (Kaggle's DownloadDataset).
        """
        response = self._send(method, url, params=params, json=json, headers=dict(headers or {}), auth=auth,
                              stream=True)
        try:
            yield response
        finally:
            response.close()
            self._host(url).lock.release()

    @contextmanager
    def reserve_host(self, url: str) -> Iterator[HostPolicy]:
        """Hold `url`'s host for a client we do not drive ourselves (huggingface_hub's downloads): nothing else
        of ours goes to that host meanwhile, the rate cap and an open breaker still apply."""
        host = self._host(url)
        with host.lock:
            if host.blocked:
                raise BlockedError(redact_url(url), None, f"this host blocked us earlier in this run ({host.blocked})")
            host.wait_for_slot(self._sleep)
            yield host.policy

    def host_policy(self, url: str) -> HostPolicy:
        return self._host(url).policy

    def remember_secret(self, secret: str | None) -> None:
        """Mask this value wherever the session writes text (errors, logs)."""
        if secret and len(secret) >= 4:
            self._secrets.add(secret)

    def close(self) -> None:
        session = getattr(self._local, "session", None)
        if session is not None:
            session.close()
            self._local.session = None

    def __enter__(self) -> PoliteSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals -----------------------------------------------------------------------------------------------

    @property
    def _requests(self) -> requests.Session:
        # requests.Session is not thread-safe; each thread gets its own connection pool.
        session = getattr(self._local, "session", None)
        if session is None:
            session = requests.Session()
            session.headers["User-Agent"] = self.user_agent
            self._local.session = session
        return session

    def _host(self, url: str) -> _HostState:
        parts = urlsplit(url)
        name = parts.netloc.rsplit("@", 1)[-1].lower()
        with self._hosts_lock:
            state = self._hosts.get(name)
            if state is None:
                policy = self.policies.get(name) or self.policies.get(parts.hostname or "") or self.default_policy
                state = self._hosts[name] = _HostState(policy)
            return state

    def _redact(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text

    def _note_credentials(self, headers: Mapping[str, str], auth: tuple[str, str] | None) -> None:
        for name, value in headers.items():
            if name.lower() in ("authorization", "proxy-authorization"):
                self.remember_secret(value)
                self.remember_secret(value.split(" ", 1)[-1])
        if auth:
            self.remember_secret(auth[1])  # the password/key; a user name is no secret (and often a dataset owner)

    def _send(self, method: str, url: str, *, stream: bool = False, **kwargs: Any) -> requests.Response:
        """Send with retries. On return the response is good (2xx); for `stream=True` the host lock is still held."""
        host = self._host(url)
        self._note_credentials(kwargs.get("headers") or {}, kwargs.get("auth"))
        policy = host.policy
        jitter = tenacity.wait_random_exponential(multiplier=policy.backoff_base, max=policy.backoff_max)

        def wait(state: tenacity.RetryCallState) -> float:
            error = state.outcome.exception() if state.outcome else None
            server = error.server_wait if isinstance(error, _Retryable) else None
            return max(server or 0.0, jitter(state))

        def before_sleep(state: tenacity.RetryCallState) -> None:
            error = state.outcome.exception() if state.outcome else None
            log.info("retrying %s %s in %.1fs (attempt %d): %s", method, redact_url(url),
                     state.upcoming_sleep, state.attempt_number, error)

        retrying = tenacity.Retrying(
            stop=tenacity.stop_after_attempt(policy.max_attempts),
            wait=wait,
            retry=tenacity.retry_if_exception_type(_Retryable),
            sleep=self._sleep,
            before_sleep=before_sleep,
            reraise=True,
        )
        try:
            return retrying(self._attempt, host, method, url, stream=stream, **kwargs)
        except _Retryable as exc:
            error = exc.error
            raise type(error)(error.url, error.status,
                              f"{error.detail} (gave up after {policy.max_attempts} attempts)") from None

    def _attempt(self, host: _HostState, method: str, url: str, *, stream: bool, **kwargs: Any) -> requests.Response:
        shown = redact_url(url)
        policy = host.policy
        host.lock.acquire()
        keep_lock = False
        try:
            if host.blocked:
                raise BlockedError(shown, None, f"this host blocked us earlier in this run ({host.blocked}); "
                                               "no further requests are sent to it")
            host.wait_for_slot(self._sleep)
            log.debug("%s %s", method, shown)
            try:
                response = self._requests.request(
                    method, url, timeout=(policy.connect_timeout, policy.read_timeout), stream=stream, **kwargs
                )
            except requests.Timeout as exc:
                raise _Retryable(TransportError(shown, None, f"timed out ({type(exc).__name__})")) from None
            except requests.ConnectionError as exc:
                detail = self._redact(str(exc.args[0] if exc.args else exc))
                raise _Retryable(TransportError(shown, None, f"connection failed ({detail})")) from None
            self._note_rate_headers(host, response)
            status = response.status_code
            if 200 <= status < 300:
                keep_lock = stream
                return response
            self._raise_for(host, response, shown)
            raise AssertionError("unreachable")  # _raise_for always raises
        finally:
            if not keep_lock:
                host.lock.release()

    def _note_rate_headers(self, host: _HostState, response: requests.Response) -> None:
        remaining = response.headers.get("X-RateLimit-Remaining")
        if remaining is not None and remaining.strip().isdigit() and int(remaining) <= host.policy.low_remaining:
            wait = server_wait_seconds({"X-RateLimit-Reset": response.headers.get("X-RateLimit-Reset", "")})
            if wait:
                host.pause_for(min(wait, host.policy.max_server_wait))

    def _raise_for(self, host: _HostState, response: requests.Response, shown: str) -> None:
        status = response.status_code
        policy = host.policy
        try:
            text = next(response.iter_content(4096), b"").decode("utf-8", "replace")
        except (requests.RequestException, OSError):  # a broken error body must not hide the status
            text = ""
        finally:
            response.close()
        snippet = self._redact(" ".join(text.split())[:200])
        if status in policy.block_statuses or BLOCKED_MARKER in text.lower():
            host.blocked = f"HTTP {status}: {snippet or response.reason}"
            raise BlockedError(shown, status, f"the host refused us ({snippet or response.reason}); "
                                              "stopping all requests to it")
        error = HttpError(shown, status, snippet or str(response.reason))
        if status not in policy.retry_statuses:
            raise error
        wait = server_wait_seconds(response.headers)
        if wait is not None and wait > policy.max_server_wait:
            raise HttpError(shown, status, f"the server asks us to wait {wait:.0f}s, longer than the "
                                           f"{policy.max_server_wait:.0f}s we allow; try again later")
        if wait is not None:
            host.pause_for(wait)
        raise _Retryable(error, wait)

    # -- cache ---------------------------------------------------------------------------------------------------

    def _cache_path(self, key: str) -> Path | None:
        return self.cache_dir / key[:2] / f"{key}.json" if self.cache_dir else None

    def _cache_read(self, key: str) -> JsonResponse | None:
        path = self._cache_path(key)
        if path is None or not path.is_file():
            return None
        if self.cache_ttl is not None and time.time() - path.stat().st_mtime > self.cache_ttl:
            return None
        try:
            entry = json.loads(path.read_text(encoding="utf-8"))
            return JsonResponse(entry["data"], entry["status"], entry["url"], entry["headers"], from_cache=True)
        except (OSError, ValueError, KeyError):
            log.warning("ignoring unreadable cache file %s", path)
            return None

    def _cache_write(self, key: str, method: str, url: str, params: Mapping[str, Any] | None, body: Any,
                     result: JsonResponse) -> None:
        path = self.cache_dir / key[:2] / f"{key}.json"
        entry = {
            "request": {"method": method.upper(), "url": redact_url(url), "params": _public_params(params),
                        "body": body},
            "status": result.status,
            "url": result.url,
            "headers": result.headers,
            "fetched_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "data": result.data,
        }
        text = self._redact(json.dumps(entry, indent=1, sort_keys=True, default=str))
        write_text_atomic(path, text)
