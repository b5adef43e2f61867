"""The one interface every model backend implements, and the values that cross it.

A :class:`ModelRequest` is backend-neutral: the prompt text plus the image exactly as the model
must see it (already resized and with the ROI drawn). Backends turn it into their own request
(an OpenAI chat message with a data URL, a vLLM ``LLM.chat`` conversation, a transformers
processor call) and return a :class:`ChatResult`, or raise :class:`BackendError` with a reason
from :data:`mmbu.benchmark_eval.records.ERROR_REASONS`.
"""
from __future__ import annotations

import abc
import base64
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ModelRequest:
    request_id: str
    prompt: str
    image: bytes                      # encoded image as sent (PNG or JPEG)
    image_mime: str = "image/png"
    system: str | None = None
    max_tokens: int = 512
    temperature: float = 0.0
    seed: int | None = 0
    image_url: str | None = None      # the data URL, when the caller already built (and shares) it
    # The data URL as a JSON string (quotes included), shared by a row's requests: HTTP backends splice
    # it into the body instead of escaping megabytes of base64 once per request.
    image_url_json: bytes | None = None

    def data_url(self) -> str:
        return self.image_url or f"data:{self.image_mime};base64,{base64.b64encode(self.image).decode('ascii')}"


@dataclass
class ChatResult:
    """What came back. ``text`` is the raw answer ('' when empty); a refusal is kept apart."""

    text: str
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None
    latency_s: float = 0.0
    attempts: int = 1
    refusal: str | None = None
    reasoning: str | None = None
    model: str | None = None          # the model as the server names it in its answer
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def is_empty(self) -> bool:
        return self.refusal is None and not self.text.strip()

    @property
    def is_refusal(self) -> bool:
        return self.refusal is not None


class BackendError(Exception):
    """A request that produced no answer; `reason` is one word from ``records.ERROR_REASONS``."""

    def __init__(self, reason: str, message: str, *, attempts: int = 1, latency_s: float = 0.0,
                 status_code: int | None = None) -> None:
        super().__init__(message)
        self.reason, self.attempts, self.latency_s, self.status_code = reason, attempts, latency_s, status_code


def chat_messages(request: ModelRequest, *, system_prompt_supported: bool = True,
                  image_url: Any = None) -> list[dict[str, Any]]:
    """OpenAI chat messages for a request: image first, then the text (the order VLM cards use).

    Models without a system role get the system text prepended to the user turn instead.
    `image_url` replaces the data URL (e.g. by an already serialised ``orjson.Fragment``).
    """
    prompt = request.prompt
    messages: list[dict[str, Any]] = []
    if request.system:
        if system_prompt_supported:
            messages.append({"role": "system", "content": request.system})
        else:
            prompt = f"{request.system}\n\n{prompt}"
    messages.append({
        "role": "user",
        "content": [
            {"type": "image_url", "image_url": {"url": request.data_url() if image_url is None else image_url}},
            {"type": "text", "text": prompt},
        ],
    })
    return messages


class Backend(abc.ABC):
    """Answers model requests. `generate` may be called concurrently (async) or in one batch."""

    name: str = "backend"

    @abc.abstractmethod
    async def generate(self, request: ModelRequest) -> ChatResult:
        """Answer one request or raise :class:`BackendError`."""

    async def generate_batch(self, requests: Sequence[ModelRequest]) -> list[ChatResult | BackendError]:
        """Answer many requests; offline engines override this to hand the whole batch over at once."""
        results: list[ChatResult | BackendError] = []
        for request in requests:
            try:
                results.append(await self.generate(request))
            except BackendError as exc:
                results.append(exc)
        return results

    @property
    def prefers_batches(self) -> bool:
        """True for in-process engines that schedule a whole batch themselves (vLLM, transformers)."""
        return False

    async def aclose(self) -> None:
        return None

    def describe(self) -> dict[str, Any]:
        """What goes into the run manifest (never secrets)."""
        return {"backend": self.name}


class BatchBackend(Backend):
    """In-process engines (vLLM, transformers): whole batches at once; `generate` is a batch of one."""

    @property
    def prefers_batches(self) -> bool:
        return True

    async def generate(self, request: ModelRequest) -> ChatResult:
        (answer,) = await self.generate_batch([request])
        if isinstance(answer, BackendError):
            raise answer
        return answer


def answer_in_halves(requests: list[Any], answer_all: Callable[[list[Any]], list[Any]],
                     to_error: Callable[[Any, Exception], Any]) -> list[Any]:
    """`answer_all(requests)`; if it raises, split and retry each half, down to single requests.

    Engines reject a whole batch for one bad prompt (too long, say); this isolates it so one bad
    sample costs one error record, not the batch.
    """
    try:
        return answer_all(requests)
    except Exception as exc:  # engines raise plain ValueError/RuntimeError for a bad prompt in the batch
        if len(requests) == 1:
            return [to_error(requests[0], exc)]
        middle = len(requests) // 2
        return (answer_in_halves(requests[:middle], answer_all, to_error)
                + answer_in_halves(requests[middle:], answer_all, to_error))
