"""Before a run asks thousands of questions, ask each endpoint two: what do you serve, and can you answer?

`preflight` sends `GET {base}/models` and one tiny text-only chat request to every base URL of an
`OpenAICompatClient`, once each, without retries. A refused connection, a model name the server does not serve
(the names it serves are listed), an authentication error or a 5xx raises `PreflightError` with the server's own
message, so the command stops at once (exit 2) instead of retrying every request of the run. A 429 only says the
server is busy and passes. What the server reports — the names `/models` lists and the `model` field of the
answer — is returned for the run's provenance.

A server without `/models` (404) is asked the tiny request only. A model name the server does not list but
answers for anyway (an alias, a proxy's wildcard route) passes with a note.
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass

import aiohttp
import orjson

from mmbu.benchmark_eval.backends.bounded_body import ResponseTooLarge, ResponseTooSlow, read_bounded_body
from mmbu.benchmark_eval.backends.openai_compat import HttpAnswer, OpenAICompatClient, _describe, _error_text
from mmbu.core.chat import chat_body, read_chat_answer
from mmbu.core.secrets import redact_secrets

# Recognisable in server logs; asks for the shortest possible answer.
PREFLIGHT_PROMPT = "mmbu preflight: reply with the word OK."
PREFLIGHT_TIMEOUT_S = 60.0  # a cold server may load the model on its first request


class PreflightError(Exception):
    """An endpoint that cannot serve the run; the message quotes the server (or the OS) and says what to fix."""


@dataclass(frozen=True)
class EndpointCheck:
    """What one base URL said about itself."""

    base_url: str
    served_models: tuple[str, ...] | None  # what GET /models lists (None: the server has no such endpoint)
    reported_model: str | None  # the `model` field of its answer to the tiny request
    note: str | None = None  # something to tell the user that does not stop the run


async def preflight(client: OpenAICompatClient, *, role: str = "model", option: str = "--served-model-name",
                    max_tokens_field: str = "max_tokens", temperature: bool = True) -> list[EndpointCheck]:
    """Check every base URL of `client` for its model (`client.model`); raises PreflightError on the first that
    cannot serve. `role` names the endpoint in messages (model, judge), `option` the flag that sets the name."""
    checks = []
    for url in client.base_urls:
        served = await _served_models(client, url, role)
        answer_model, note = await _tiny_request(client, url, role, option, served, max_tokens_field, temperature)
        if served is not None and client.model not in served:
            note = (f"{url} does not list '{client.model}' among its models ({', '.join(served) or 'none'}) "
                    f"but answered for it")
        checks.append(EndpointCheck(url, served, answer_model, note))
    return checks


async def _request(client: OpenAICompatClient, url: str, method: str, target: str,
                   payload: bytes | None = None) -> HttpAnswer:
    """One request through the client's own session, proxy and body bounds (size and rate)."""
    async with client._http().request(method, target, data=payload, proxy=client._proxies[url],
                                      timeout=aiohttp.ClientTimeout(total=PREFLIGHT_TIMEOUT_S)) as response:
        body = await read_bounded_body(response, client.max_response_bytes, url, client.min_response_rate)
        return HttpAnswer(response.status, response.headers, body)


async def _exchange(client: OpenAICompatClient, url: str, role: str, send) -> HttpAnswer:
    try:
        return await send()
    except (ResponseTooLarge, ResponseTooSlow) as exc:
        raise PreflightError(f"the {role} server at {url} answered a preflight request badly: {exc}") from None
    except TimeoutError:
        raise PreflightError(f"the {role} server at {url} did not answer within {PREFLIGHT_TIMEOUT_S:g} s; is it "
                             f"still loading, or is --base-url wrong?") from None
    except (aiohttp.ClientError, OSError) as exc:
        raise PreflightError(f"cannot reach the {role} server at {url}: "
                             f"{redact_secrets(_describe(exc), client._secrets)}; check --base-url and that the "
                             f"server is running") from None


def _refusal(client: OpenAICompatClient, url: str, role: str, what: str, answer: HttpAnswer) -> PreflightError | None:
    """The error for an answer that stops the run (authentication, 5xx), else None."""
    text = redact_secrets(_error_text(answer), client._secrets)
    if answer.status_code in (401, 403):
        key = "the API key it was sent was refused" if "Authorization" in client._headers else \
            "no API key was sent: set the variable --api-key-env names"
        return PreflightError(f"the {role} server at {url} refused {what} (HTTP {answer.status_code}: {text}); {key}")
    if answer.status_code >= 500:
        return PreflightError(f"the {role} server at {url} failed {what} (HTTP {answer.status_code}: {text})")
    return None


async def _served_models(client: OpenAICompatClient, url: str, role: str) -> tuple[str, ...] | None:
    answer = await _exchange(client, url, role, lambda: _request(client, url, "GET", f"{url}/models"))
    if (error := _refusal(client, url, role, "to list its models", answer)) is not None:
        raise error
    if answer.status_code != 200:
        return None  # no /models here: the tiny request decides
    try:
        data = answer.json().get("data")
        return tuple(str(item["id"]) for item in data if isinstance(item, dict) and "id" in item)
    except (ValueError, AttributeError, TypeError):
        return None


async def _tiny_request(client: OpenAICompatClient, url: str, role: str, option: str,
                        served: tuple[str, ...] | None, max_tokens_field: str,
                        temperature: bool) -> tuple[str | None, str | None]:
    body = chat_body(client.model, [{"role": "user", "content": PREFLIGHT_PROMPT}], max_tokens=16,
                     max_tokens_field=max_tokens_field, temperature=0.0 if temperature else None)
    answer = await _exchange(client, url, role,
                             lambda: _request(client, url, "POST", client._endpoints[url], orjson.dumps(body)))
    if (error := _refusal(client, url, role, "a one-line test request", answer)) is not None:
        raise error
    if answer.status_code == 429:
        return None, f"{url} is rate limiting (HTTP 429); the run backs off as it asks"
    if answer.status_code >= 400:
        text = redact_secrets(_error_text(answer), client._secrets)
        if served is not None and client.model not in served:
            raise PreflightError(_not_served(client.model, url, role, option, served, f"HTTP {answer.status_code}: {text}"))
        raise PreflightError(f"the {role} server at {url} rejected a one-line test request for '{client.model}' "
                             f"(HTTP {answer.status_code}: {text})")
    try:
        reported = read_chat_answer(answer.json()).model
    except ValueError as exc:
        raise PreflightError(f"the {role} server at {url} answered a one-line test request with something that is "
                             f"not a chat completion ({exc}): {answer.text[:120]!r}") from None
    return reported, None


def _not_served(model: str, url: str, role: str, option: str, served: tuple[str, ...], server_says: str) -> str:
    close = difflib.get_close_matches(model, served, n=1, cutoff=0.5)
    hint = f" Did you mean '{close[0]}'?" if close else ""
    return (f"the {role} server at {url} does not serve '{model}' ({server_says}); it serves: "
            f"{', '.join(served) or 'nothing'}.{hint} Give the served name with {option}")
