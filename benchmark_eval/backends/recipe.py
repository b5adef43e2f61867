"""`BackendRecipe`: the backend options of one `mmbu eval run`, stated once, and the one way to build the backend.

`run_eval` makes the recipe from its `EvalConfig`; the parent process builds its backend from it (the preflight, the
run record's description and, with one process, the run itself) and with `--workers` every worker process builds
its own from the same recipe with its share of the concurrency (HTTP clients and engines do not cross processes).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from mmbu.benchmark_eval.backends.base import Backend
from mmbu.benchmark_eval.backends.bounded_body import DEFAULT_MAX_RESPONSE_BYTES
from mmbu.benchmark_eval.backends.openai_compat import (DEFAULT_MAX_CONSECUTIVE_FAILURES, OpenAICompatBackend,
                                                        OpenAICompatClient)
from mmbu.benchmark_eval.models.registry import ModelEntry

BackendKind = Literal["openai", "vllm", "hf"]


@dataclass(frozen=True)
class BackendRecipe:
    kind: BackendKind
    entry: ModelEntry  # the model: its chat quirks (openai), or what the in-process engine loads
    base_urls: tuple[str, ...] = ()  # openai: the endpoints, requests spread over them
    served_model: str = ""  # openai: the name the server expects
    api_key_env: str | None = None  # openai: the environment variable holding the key (None: no key sent)
    timeout_s: float = 120.0  # openai: seconds per request
    max_attempts: int = 6
    backoff_s: float = 1.0
    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES  # larger answers (on the wire or inflated) are errors
    max_consecutive_failures: int = DEFAULT_MAX_CONSECUTIVE_FAILURES  # per process: each has its own client
    tensor_parallel_size: int = 1  # vllm

    def build(self, concurrency: int) -> Backend:
        """A new backend with `concurrency` requests in flight (the in-process engines batch instead)."""
        return _BUILDERS[self.kind](self, concurrency)


def _openai(recipe: BackendRecipe, concurrency: int) -> Backend:
    client = OpenAICompatClient(list(recipe.base_urls), recipe.served_model, api_key_env=recipe.api_key_env,
                                concurrency=concurrency, timeout_s=recipe.timeout_s, max_attempts=recipe.max_attempts,
                                backoff_s=recipe.backoff_s, max_response_bytes=recipe.max_response_bytes,
                                max_consecutive_failures=recipe.max_consecutive_failures)
    return OpenAICompatBackend(client, recipe.entry.chat)


def _vllm(recipe: BackendRecipe, concurrency: int) -> Backend:
    from mmbu.benchmark_eval.backends.vllm_offline import VLLMOfflineBackend  # imports vllm: only when asked for

    return VLLMOfflineBackend(recipe.entry, tensor_parallel_size=recipe.tensor_parallel_size)


def _transformers(recipe: BackendRecipe, concurrency: int) -> Backend:
    from mmbu.benchmark_eval.backends.transformers_local import TransformersBackend  # imports torch: only when asked

    return TransformersBackend(recipe.entry)


_BUILDERS: dict[str, Callable[[BackendRecipe, int], Backend]] = {
    "openai": _openai, "vllm": _vllm, "hf": _transformers,
}
