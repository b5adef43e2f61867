"""The OpenAI chat-completions wire format, for every client that speaks it.

Two clients use it, each with the transport its work needs: discovery's optional LLM helper
(`mmbu.curation.agent.llm`) asks a few dozen questions through the toolkit's polite, per-host rate-limited
`PoliteSession`; the evaluation (`mmbu.benchmark_eval.backends.openai_compat`) keeps hundreds of requests in
flight over aiohttp with an adaptive concurrency limit. What they share is what goes over the wire: the
endpoint, the request body and how an answer is read (content parts, refusals, reasoning), so both read a
server's answer the same way.

Base URLs follow the OpenAI SDK convention and include the version prefix:
`http://host:8000/v1` -> `POST http://host:8000/v1/chat/completions`.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


def chat_url(base_url: str) -> str:
    return f"{base_url.rstrip('/')}/chat/completions"


def chat_body(model: str, messages: Sequence[Mapping[str, Any]], *, max_tokens: int | None = None,
              max_tokens_field: str = "max_tokens", temperature: float | None = None, seed: int | None = None,
              extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """One non-streamed completion request. None leaves a field out (APIs that refuse it, servers' defaults);
    `max_tokens_field` is `max_completion_tokens` for OpenAI's reasoning models; `extra` is merged last."""
    body: dict[str, Any] = {"model": model, "messages": list(messages)}
    if max_tokens is not None:
        body[max_tokens_field] = max_tokens
    body |= {"n": 1, "stream": False}
    if temperature is not None:
        body["temperature"] = temperature
    if seed is not None:
        body["seed"] = seed
    if extra:
        body.update(extra)
    return body


@dataclass(frozen=True)
class ChatAnswer:
    """The first choice of a completion: `text` is '' when empty; a refusal is kept apart from the text."""

    text: str
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None
    refusal: str | None = None
    reasoning: str | None = None
    model: str | None = None  # the model as the server names it in its answer (provenance)


def read_chat_answer(payload: Any) -> ChatAnswer:
    """The answer in a decoded chat-completion body. ValueError (saying what is wrong) when the body is not
    one: valid JSON of the wrong shape (a number, list or object where text is expected) is as malformed as
    invalid JSON. A malformed `usage` or `reasoning` is dropped (it does not change the answer)."""
    choices = payload.get("choices") if isinstance(payload, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise ValueError("no choices")
    choice = choices[0]
    message = choice.get("message") or {}
    if not isinstance(message, dict):
        raise ValueError(f"message is a {type(message).__name__}")
    content = message.get("content")
    if isinstance(content, list):  # content parts
        texts = [part.get("text", "") for part in content if isinstance(part, dict) and part.get("type", "text") == "text"]
        if not all(isinstance(text, str) for text in texts):
            raise ValueError("a content part's text is not text")
        content = "".join(texts)
    if content is not None and not isinstance(content, str):
        raise ValueError(f"content is a {type(content).__name__}")
    finish_reason = choice.get("finish_reason")
    finish_reason = finish_reason if isinstance(finish_reason, str) else None
    refusal = message.get("refusal")
    refusal = None if refusal is None else str(refusal)
    if refusal is None and finish_reason == "content_filter" and not content:
        refusal = "content_filter"
    usage = payload.get("usage")
    reasoning = message.get("reasoning_content") or message.get("reasoning")
    model = payload.get("model")
    return ChatAnswer(text=content or "", finish_reason=finish_reason,
                      usage=usage if isinstance(usage, dict) and all(isinstance(k, str) for k in usage) else None,
                      refusal=refusal, reasoning=reasoning if isinstance(reasoning, str) else None,
                      model=model if isinstance(model, str) else None)
