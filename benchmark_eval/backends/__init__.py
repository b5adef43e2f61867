"""Model backends behind one interface (:class:`Backend`): OpenAI-compatible servers, vLLM offline, transformers."""
from mmbu.benchmark_eval.backends.base import Backend, BackendError, ChatResult, ModelRequest, chat_messages
from mmbu.benchmark_eval.backends.openai_compat import OpenAICompatBackend, OpenAICompatClient, read_api_key

__all__ = ["Backend", "BackendError", "ChatResult", "ModelRequest", "OpenAICompatBackend", "OpenAICompatClient",
           "chat_messages", "read_api_key"]
