"""vLLM in-process batch inference: one ``LLM.chat`` call over a large batch (vLLM schedules it).

Optional extra ``vllm`` (imported on first use). The request construction — the conversations,
sampling parameters and engine arguments handed to vLLM — is plain data built by the functions
below and tested without a GPU. A batch that vLLM rejects as a whole (one prompt too long, say)
is split in halves until the offending request is isolated, so one bad sample costs one
``error`` record, not the batch.
"""
from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Sequence
from typing import Any

from mmbu.benchmark_eval.backends.base import (BackendError, BatchBackend, ChatResult, ModelRequest, answer_in_halves,
                                               chat_messages)
from mmbu.benchmark_eval.models.box_format import SmartResize
from mmbu.benchmark_eval.models.registry import ModelEntry

_TOO_LONG = re.compile(r"longer than the maximum model length|max_model_len|too long|exceeds", re.I)


def engine_kwargs(entry: ModelEntry, *, tensor_parallel_size: int = 1, gpu_memory_utilization: float = 0.9,
                  max_model_len: int | None = None, seed: int = 0) -> dict[str, Any]:
    """Arguments for ``vllm.LLM``: the HF repo and revision, one image per prompt, the processor limits."""
    kwargs: dict[str, Any] = {
        "model": entry.hf_id, "revision": entry.revision, "tensor_parallel_size": tensor_parallel_size,
        "gpu_memory_utilization": gpu_memory_utilization, "limit_mm_per_prompt": {"image": 1}, "seed": seed,
        "trust_remote_code": entry.family_facts.trust_remote_code,
    }
    if max_model_len:
        kwargs["max_model_len"] = max_model_len
    resize = entry.box_format.resize
    if isinstance(resize, SmartResize):
        # The image is sent already smart-resized; these limits keep the processor's resize the identity.
        kwargs["mm_processor_kwargs"] = {"min_pixels": resize.min_pixels, "max_pixels": resize.max_pixels}
    elif entry.image.max_pixels and entry.family_facts.processor_max_pixels:
        kwargs["mm_processor_kwargs"] = {"max_pixels": entry.image.max_pixels}
    return {k: v for k, v in kwargs.items() if v is not None}


def sampling_kwargs(request: ModelRequest) -> dict[str, Any]:
    """Arguments for ``vllm.SamplingParams`` (greedy at temperature 0, seeded, n = 1)."""
    kwargs: dict[str, Any] = {"temperature": request.temperature, "max_tokens": request.max_tokens, "n": 1}
    if request.seed is not None:
        kwargs["seed"] = request.seed
    return kwargs


def conversations(requests: Sequence[ModelRequest], entry: ModelEntry) -> list[list[dict[str, Any]]]:
    """The OpenAI-style conversations ``LLM.chat`` takes (images as data URLs, which vLLM decodes)."""
    return [chat_messages(r, system_prompt_supported=entry.chat.system_prompt) for r in requests]


def _error_for(request: ModelRequest, exc: Exception) -> BackendError:
    reason = "prompt_too_long" if _TOO_LONG.search(str(exc)) else "backend_error"
    return BackendError(reason, f"vLLM rejected {request.request_id}: {type(exc).__name__}: {str(exc)[:300]}")


class VLLMOfflineBackend(BatchBackend):
    name = "vllm"

    def __init__(self, entry: ModelEntry, **engine_options: Any) -> None:
        if not entry.hf_id:
            raise ValueError(f"{entry.name} has no hf_id; vLLM offline needs open weights")
        self.entry = entry
        self.engine_options = engine_options
        self._llm: Any = None

    def _engine(self) -> Any:
        if self._llm is None:
            try:
                from vllm import LLM
            except ImportError as exc:  # the optional extra is missing
                raise BackendError("backend_error", "vLLM is not installed; install the extra: pip install 'mmbu[vllm]'") from exc
            self._llm = LLM(**engine_kwargs(self.entry, **self.engine_options))
        return self._llm

    def _answer_all(self, requests: list[ModelRequest]) -> list[ChatResult]:
        from vllm import SamplingParams

        llm = self._engine()
        started = time.monotonic()
        outputs = llm.chat(conversations(requests, self.entry), [SamplingParams(**sampling_kwargs(r)) for r in requests],
                           use_tqdm=False)
        per_request = (time.monotonic() - started) / max(len(requests), 1)
        results = []
        for output in outputs:
            completion = output.outputs[0]
            results.append(ChatResult(
                text=completion.text, finish_reason=completion.finish_reason, latency_s=per_request,
                usage={"prompt_tokens": len(output.prompt_token_ids or []), "completion_tokens": len(completion.token_ids)},
            ))
        return results

    async def generate_batch(self, requests: Sequence[ModelRequest]) -> list[ChatResult | BackendError]:
        try:
            self._engine()
        except BackendError as exc:
            return [exc for _ in requests]
        return await asyncio.to_thread(answer_in_halves, list(requests), self._answer_all, _error_for)

    def describe(self) -> dict[str, Any]:
        return {"backend": self.name, "engine": engine_kwargs(self.entry, **self.engine_options)}
