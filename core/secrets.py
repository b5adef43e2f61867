"""Keeping credentials out of everything the toolkit writes or prints.

Keys reach the toolkit only from the environment (docs/architecture.md §3.3). They could still leak through text
that other parties write: a proxy that echoes the `Authorization` header in its error page, a base URL
given as `https://user:key@host/v1`, a signed download URL in an error message. Every error, record
and report that quotes such text passes it through `redact_secrets`, and every URL through `redact_url`.
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

MASK = "***"
# Query parameters that carry secrets (Zenodo's `access_token`, API keys ...): masked in logs, errors, cache.
SENSITIVE_PARAM = re.compile(r"token|key|secret|password|signature|credential|auth", re.IGNORECASE)
# Things shaped like credentials wherever they appear: an HTTP auth header's value, the OpenAI / Hugging
# Face / Anthropic / GitHub key formats, and user:password@ in a URL.
_SECRET_SHAPES = (
    re.compile(r"(?i)\b(bearer|basic)(\s+|%20)[A-Za-z0-9._~+/=-]{8,}"),
    re.compile(r"\b(?:sk|rk|pk)-[A-Za-z0-9_-]{16,}"),
    re.compile(r"\bhf_[A-Za-z0-9]{16,}"),
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}"),
    re.compile(r"(?i)(\"?(?:api[_-]?key|authorization|x-api-key)\"?\s*[:=]\s*\"?)[^\s\",}]{6,}"),
    re.compile(r"(?<=://)[^/\s:@]+:[^/\s@]+(?=@)"),
)


def redact_secrets(text: str, known: Iterable[str | None] = ()) -> str:
    """`text` with the `known` secret values and anything shaped like a credential replaced by ***."""
    for secret in known:
        if secret and len(secret) >= 4:
            text = text.replace(secret, MASK)
    for shape in _SECRET_SHAPES:
        text = shape.sub(_masked, text)
    return text


def _masked(match: re.Match) -> str:
    groups = [g for g in match.groups() if g is not None]
    return "".join(groups[:2]) + MASK if groups else MASK


def redact_url(url: str) -> str:
    """The URL with user:password and secret-looking query values replaced by ***."""
    parts = urlsplit(url)
    netloc = parts.netloc.rsplit("@", 1)[-1]
    query = urlencode(
        [(k, MASK if SENSITIVE_PARAM.search(k) else v) for k, v in parse_qsl(parts.query, keep_blank_values=True)]
    )
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def has_userinfo(url: str) -> bool:
    """Whether a URL carries `user[:password]@` (credentials that must not be written anywhere)."""
    return "@" in urlsplit(url).netloc


# Options whose value is a secret (`--api-key X`, `--token=X`); `--api-key-env NAME` only names a variable.
_SECRET_OPTION = re.compile(r"^--?[\w-]*(key|token|secret|password)[\w-]*$", re.I)
_URL_USERINFO = re.compile(r"(?<=://)[^/@\s]+@")


def redact_argv(argv: Sequence[str]) -> list[str]:
    """The command line without secrets: values of *key/token/secret/password* options, URL credentials and
    anything shaped like a key (`redact_secrets`)."""
    cleaned: list[str] = []
    hide_next = False
    for arg in argv:
        if hide_next:
            cleaned.append("<redacted>")
            hide_next = False
            continue
        name, eq, value = arg.partition("=")
        if _SECRET_OPTION.match(name) and not name.endswith("-env"):
            if eq:
                cleaned.append(f"{name}=<redacted>")
            else:
                cleaned.append(arg)
                hide_next = True
            continue
        cleaned.append(redact_secrets(_URL_USERINFO.sub("<redacted>@", arg)))
    return cleaned
