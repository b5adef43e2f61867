"""Hugging Face transformers, in process: the fallback for models no server or vLLM can serve.

Optional extra ``hf`` (torch, transformers, accelerate), imported on first use. Requests are
turned into the processor's chat messages (an image placeholder plus the text) and batched
through ``processor.apply_chat_template`` and ``model.generate`` with greedy decoding. The
message construction is plain data, tested without a GPU.
"""
from __future__ import annotations

import asyncio
import io
import time
from collections.abc import Sequence
from typing import Any

from mmbu.benchmark_eval.backends.base import BackendError, BatchBackend, ChatResult, ModelRequest, answer_in_halves
from mmbu.benchmark_eval.models.registry import ModelEntry


def processor_messages(request: ModelRequest, entry: ModelEntry) -> list[dict[str, Any]]:
    """The chat messages ``processor.apply_chat_template`` takes for one request."""
    prompt = request.prompt
    messages: list[dict[str, Any]] = []
    if request.system:
        if entry.chat.system_prompt:
            messages.append({"role": "system", "content": [{"type": "text", "text": request.system}]})
        else:
            prompt = f"{request.system}\n\n{prompt}"
    messages.append({"role": "user", "content": [{"type": "image"}, {"type": "text", "text": prompt}]})
    return messages


def generate_kwargs(request: ModelRequest) -> dict[str, Any]:
    """Greedy decoding at temperature 0 (sampling otherwise); ``max_new_tokens`` from the request."""
    if request.temperature and request.temperature > 0:
        return {"max_new_tokens": request.max_tokens, "do_sample": True, "temperature": request.temperature}
    return {"max_new_tokens": request.max_tokens, "do_sample": False}


def decode_image(request: ModelRequest) -> Any:
    from PIL import Image

    return Image.open(io.BytesIO(request.image)).convert("RGB")


class TransformersBackend(BatchBackend):
    name = "hf"

    def __init__(self, entry: ModelEntry, *, device_map: str = "auto", dtype: str = "auto") -> None:
        if not entry.hf_id:
            raise ValueError(f"{entry.name} has no hf_id; transformers needs open weights")
        self.entry, self.device_map, self.dtype = entry, device_map, dtype
        self._model: Any = None
        self._processor: Any = None

    def _load(self) -> tuple[Any, Any]:
        if self._model is None:
            try:
                from transformers import AutoModelForImageTextToText, AutoProcessor
            except ImportError as exc:
                raise BackendError("backend_error", "transformers is not installed; install the extra: pip install 'mmbu[hf]'") from exc
            remote = self.entry.family_facts.trust_remote_code
            self._processor = AutoProcessor.from_pretrained(self.entry.hf_id, revision=self.entry.revision,
                                                            trust_remote_code=remote)
            if getattr(self._processor, "tokenizer", None) is not None:
                self._processor.tokenizer.padding_side = "left"  # batched generation needs left padding
            self._model = AutoModelForImageTextToText.from_pretrained(
                self.entry.hf_id, revision=self.entry.revision, torch_dtype=self.dtype, device_map=self.device_map,
                trust_remote_code=remote).eval()
        return self._model, self._processor

    def _answer_all(self, requests: list[ModelRequest]) -> list[ChatResult]:
        import torch

        model, processor = self._load()
        texts = [processor.apply_chat_template(processor_messages(r, self.entry), add_generation_prompt=True, tokenize=False)
                 for r in requests]
        inputs = processor(text=texts, images=[decode_image(r) for r in requests], padding=True,
                           return_tensors="pt").to(model.device)
        started = time.monotonic()
        with torch.inference_mode():
            generated = model.generate(**inputs, **generate_kwargs(requests[0]))
        new_tokens = generated[:, inputs["input_ids"].shape[1]:]
        texts_out = processor.batch_decode(new_tokens, skip_special_tokens=True)
        per_request = (time.monotonic() - started) / len(requests)
        return [ChatResult(text=t, finish_reason=None, latency_s=per_request,
                           usage={"completion_tokens": int((row != processor.tokenizer.pad_token_id).sum())})
                for t, row in zip(texts_out, new_tokens)]

    async def generate_batch(self, requests: Sequence[ModelRequest]) -> list[ChatResult | BackendError]:
        try:
            self._load()
        except BackendError as exc:
            return [exc for _ in requests]
        # Requests with different max_tokens/temperature are generated in groups of equal settings.
        groups: dict[tuple, list[int]] = {}
        for index, request in enumerate(requests):
            groups.setdefault(tuple(sorted(generate_kwargs(request).items())), []).append(index)
        results: list[ChatResult | BackendError | None] = [None] * len(requests)
        for indices in groups.values():
            answers = await asyncio.to_thread(
                answer_in_halves, [requests[i] for i in indices], self._answer_all,
                lambda r, exc: BackendError("backend_error", f"transformers failed on {r.request_id}: {type(exc).__name__}: {str(exc)[:300]}"))
            for index, answer in zip(indices, answers):
                results[index] = answer
        return results  # type: ignore[return-value]

    def describe(self) -> dict[str, Any]:
        return {"backend": self.name, "model": self.entry.hf_id, "revision": self.entry.revision,
                "device_map": self.device_map, "dtype": self.dtype}
