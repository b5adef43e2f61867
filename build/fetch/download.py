"""Resumable, verified downloads through the polite session.

The body streams into `<downloads>/<name>.part`; a sidecar `<name>.part.json` remembers the ETag and total
size the bytes belong to. After an interruption (this run or a later one) the download resumes with
`Range: bytes=N-` + `If-Range`, but only when the server answers 206 for the same ETag and size; anything
else starts over, so bytes of two different remote versions are never spliced together. The finished file is
checked (expected size, md5, sha256) and moved into place with os.replace; a file that fails a check is removed.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import requests
import tenacity
import urllib3

from mmbu.build.fetch.model import FetchError
from mmbu.core.files import write_text_atomic
from mmbu.core.secrets import redact_url
from mmbu.curation.http import (BodyLimits, BodyTooLarge, HostPolicy, HttpError, PoliteSession, TooSlow, bounded_chunks,
                                 size_bound)

CHUNK = 1 << 16  # small enough that a broken connection loses little of what arrived
HASH_CHUNK = 1 << 20
RESUME_ATTEMPTS = 6


class ByteProgress(Protocol):
    """Receives download progress (the CLI shows it as a rich progress bar)."""

    def start(self, name: str, total: int | None, done: int) -> None: ...
    def advance(self, n: int) -> None: ...
    def finish(self) -> None: ...


class NoProgress:
    def start(self, name: str, total: int | None, done: int) -> None:
        pass

    def advance(self, n: int) -> None:
        pass

    def finish(self) -> None:
        pass


@dataclass
class DownloadRequest:
    """One remote file. `method`/`json` exist for APIs that answer a POST with a redirect (Kaggle)."""

    url: str
    name: str
    method: str = "GET"
    json: Any = None
    auth: tuple[str, str] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    size: int | None = None
    md5: str | None = None
    sha256: str | None = None


@dataclass
class Digests:
    size: int
    sha256: str
    md5: str


class _BodyCut(Exception):
    """The connection broke while the body was streaming; resume from what we have."""


def file_digests(path: Path) -> Digests:
    """Size, sha256 and md5 of a file in one pass."""
    sha, md5 = hashlib.sha256(), hashlib.md5()
    size = 0
    with open(path, "rb") as handle:
        while block := handle.read(HASH_CHUNK):
            sha.update(block)
            md5.update(block)
            size += len(block)
    return Digests(size, sha.hexdigest(), md5.hexdigest())


def download(session: PoliteSession, request: DownloadRequest, dest: Path, downloads: Path,
             progress: ByteProgress | None = None) -> Digests:
    """Fetch `request` into `dest` (resuming a previous `.part` when safe) and verify it. Raises FetchError."""
    progress = progress or NoProgress()
    downloads.mkdir(parents=True, exist_ok=True)
    part = downloads / (request.name.replace("/", "__") + ".part")
    sidecar = part.with_name(part.name + ".json")
    shown = redact_url(request.url)
    policy = session.host_policy(request.url)
    retrying = tenacity.Retrying(
        stop=tenacity.stop_after_attempt(RESUME_ATTEMPTS),
        wait=tenacity.wait_random_exponential(multiplier=policy.backoff_base, max=policy.backoff_max),
        retry=tenacity.retry_if_exception_type(_BodyCut),
        reraise=True,
    )
    deadline = time.monotonic() + policy.file_deadline  # over every resumed attempt of this run
    try:
        retrying(_one_pass, session, request, part, sidecar, progress, deadline)
    except BodyTooLarge as exc:
        part.unlink(missing_ok=True)
        sidecar.unlink(missing_ok=True)
        raise FetchError(f"{request.name} from {shown}: {exc.detail} (declared: {_declared(request)}; "
                         "the bound is a setting: size_margin, max_undeclared_bytes in --http-policies)") from None
    except TooSlow as exc:
        raise FetchError(f"{request.name} from {shown}: {exc.detail} (min_bytes_per_second, rate_window, "
                         f"file_deadline in --http-policies); {_kept(part)} bytes kept for a later resume") from None
    except _BodyCut as exc:
        raise FetchError(f"{request.name}: the connection kept breaking ({exc}); "
                         f"{_kept(part)} bytes kept for a later resume") from None
    finally:
        progress.finish()

    digests = file_digests(part)
    problem = _verify(request, digests)
    if problem:
        part.unlink(missing_ok=True)
        sidecar.unlink(missing_ok=True)
        raise FetchError(f"{request.name} from {shown}: {problem}; the bad file was removed")
    dest.parent.mkdir(parents=True, exist_ok=True)
    os.replace(part, dest)
    sidecar.unlink(missing_ok=True)
    return digests


def _kept(part: Path) -> int:
    return part.stat().st_size if part.exists() else 0


def _declared(request: DownloadRequest) -> str:
    return f"{request.size:,} bytes" if request.size is not None else "no size"


def _verify(request: DownloadRequest, digests: Digests) -> str | None:
    if request.size is not None and digests.size != request.size:
        return f"truncated or wrong size: got {digests.size} bytes, expected {request.size}"
    if request.md5 and digests.md5 != request.md5.lower():
        return f"md5 checksum mismatch (expected {request.md5}, got {digests.md5})"
    if request.sha256 and digests.sha256 != request.sha256.lower():
        return f"sha256 checksum mismatch (expected {request.sha256}, got {digests.sha256})"
    return None


def _read_sidecar(sidecar: Path) -> dict[str, Any]:
    try:
        return json.loads(sidecar.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def stated_total_size(response: requests.Response) -> int | None:
    """The whole file's size from a 206's Content-Range or a plain 200's Content-Length (None if not stated)."""
    content_range = response.headers.get("Content-Range", "")
    match = re.match(r"bytes \d+-\d+/(\d+)$", content_range)
    if match:
        return int(match.group(1))
    length = response.headers.get("Content-Length")
    if response.status_code == 200 and length and length.isdigit() and not response.headers.get("Content-Encoding"):
        return int(length)
    return None


def _one_pass(session: PoliteSession, request: DownloadRequest, part: Path, sidecar: Path,
              progress: ByteProgress, deadline: float) -> None:
    """Stream once from wherever the `.part` file stops; raise _BodyCut if the connection breaks."""
    state = _read_sidecar(sidecar)
    offset = part.stat().st_size if part.exists() and state else 0
    if offset and state.get("size") is not None and offset >= state["size"]:
        offset = 0  # a stale or over-long part file: start over
    # identity: byte offsets and sizes must refer to the file itself, not to a compressed transfer of it.
    headers: dict[str, str] = {"Accept-Encoding": "identity", **request.headers}
    if offset:
        headers["Range"] = f"bytes={offset}-"
        if state.get("etag"):
            headers["If-Range"] = state["etag"]
    try:
        with session.stream(request.url, method=request.method, json=request.json, headers=headers,
                            auth=request.auth) as response:
            limits = _body_limits(session.host_policy(request.url), request, response, offset, deadline)
            _write_body(response, request.url, request.name, offset, state, part, sidecar, progress, limits)
    except HttpError as exc:
        if exc.status == 416 and offset:  # our part file is longer than the remote one: start over
            part.unlink(missing_ok=True)
            sidecar.unlink(missing_ok=True)
            raise _BodyCut("range not satisfiable") from None
        raise


def _body_limits(policy: HostPolicy, request: DownloadRequest, response: requests.Response, offset: int,
                 deadline: float) -> BodyLimits:
    """What this pass may still bring: the size the host's metadata, the manifest or the lock declares (else the
    size this answer states, else `max_undeclared_bytes`), plus the margin, less what the part file holds.
    An answer that itself states more is refused before its body is read."""
    declared = request.size
    stated = stated_total_size(response)
    bound = size_bound(declared if declared is not None else stated, policy)
    if stated is not None and stated > bound:
        raise BodyTooLarge(redact_url(request.url), response.status_code,
                           f"the answer states {stated:,} bytes, more than the {bound:,} allowed")
    already = offset if response.status_code == 206 else 0
    return BodyLimits(bound - already, deadline, policy.min_bytes_per_second, policy.rate_window)


def _write_body(response: requests.Response, url: str, name: str, offset: int, state: dict[str, Any],
                part: Path, sidecar: Path, progress: ByteProgress, limits: BodyLimits) -> None:
    etag = response.headers.get("ETag")
    total = stated_total_size(response)
    if offset and response.status_code == 206:
        same_object = (
            response.headers.get("Content-Range", "").startswith(f"bytes {offset}-")
            and (not state.get("etag") or etag == state["etag"])
            and (state.get("size") is None or total == state["size"])
        )
        if not same_object:  # the remote file changed under us: never splice two versions
            part.unlink(missing_ok=True)
            sidecar.unlink(missing_ok=True)
            raise _BodyCut("the remote file changed since the partial download; starting over")
    elif response.status_code != 206:
        offset = 0  # a full body (Range ignored or If-Range missed): overwrite
    write_text_atomic(sidecar, json.dumps({"url": redact_url(url), "etag": etag, "size": total}))
    progress.start(name, total, offset)
    try:
        with open(part, "ab" if offset else "wb") as handle:
            for chunk in bounded_chunks(response, limits, redact_url(url), chunk=CHUNK):
                handle.write(chunk)
                progress.advance(len(chunk))
    except (requests.ConnectionError, requests.exceptions.ChunkedEncodingError, requests.Timeout,
            urllib3.exceptions.HTTPError) as exc:  # not OSError: a full disk is the caller's sentence, not a cut
        raise _BodyCut(type(exc).__name__) from None
