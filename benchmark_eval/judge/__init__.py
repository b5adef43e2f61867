"""Judge open answers: deterministic pre-check, LLM judge with a versioned prompt, verdict cache, agreement."""
from mmbu.benchmark_eval.judge.prompt import DEFAULT_JUDGE_MODEL, JUDGE_PROMPT_VERSION

__all__ = ["DEFAULT_JUDGE_MODEL", "JUDGE_PROMPT_VERSION"]
