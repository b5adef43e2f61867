"""The judge prompt (a versioned artefact) and the strict reading of its verdict.

The paper's set-up: the judge (Qwen3-32B by default) sees only the model's answer and the gold
answer — not the image, not the question, not the other options — and decides strict
biomedical equivalence. Changing the text below without a new :data:`JUDGE_PROMPT_VERSION`
would silently mix verdicts of two prompts in one cache; ``PROMPT_SHA256`` pins it and a test
fails when the two disagree.
"""
from __future__ import annotations

import hashlib
import re
from typing import Any

JUDGE_PROMPT_VERSION = "mmbu-judge-v1"
DEFAULT_JUDGE_MODEL = "Qwen/Qwen3-32B"

SYSTEM_PROMPT = """\
You are a strict biomedical grader. You compare a model's answer with a gold answer and decide \
whether they mean the same thing. You see only the two answers.

Rules:
- Synonyms, spelling variants, abbreviations written out, singular/plural and Latin versus \
common names of the same entity are EQUIVALENT.
- Negation matters: "pneumonia" and "no pneumonia" are NOT_EQUIVALENT.
- Laterality matters: left and right are NOT_EQUIVALENT.
- Severity or grade matters: "mild" and "severe", or different grades, are NOT_EQUIVALENT.
- Uncertainty matters: a hedged answer ("possibly X", "X or Y") is NOT_EQUIVALENT to a definite X.
- Specificity matters: an answer that is more general or more specific than the gold answer \
(a parent or child category) is NOT_EQUIVALENT. An answer naming several alternatives is \
NOT_EQUIVALENT.
- Extra correct description that does not change the entity named is allowed.

Think briefly if you need to, then end your reply with exactly one line, the last line:
VERDICT: EQUIVALENT
or
VERDICT: NOT_EQUIVALENT"""

USER_TEMPLATE = """\
Gold answer: {gold}
Model answer: {answer}"""

PROMPT_SHA256 = "47a9a4047ef148260816ee9898bd74a61dffa9f77177cfd6e83fc6587b9c956a"
_VERDICT = re.compile(r"^\W*VERDICT\W*:\W*(EQUIVALENT|NOT[ _-]?EQUIVALENT)\W*$", re.IGNORECASE)


def prompt_sha256() -> str:
    """Hash of the prompt text actually in use (system + user template)."""
    return hashlib.sha256((SYSTEM_PROMPT + "\x00" + USER_TEMPLATE).encode("utf-8")).hexdigest()


def judge_messages(answer: str, gold: str) -> list[dict[str, Any]]:
    """Chat messages asking whether `answer` is equivalent to `gold`."""
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": USER_TEMPLATE.format(gold=gold.strip(), answer=answer.strip())},
    ]


def parse_verdict(text: str | None) -> bool | None:
    """True (equivalent), False (not equivalent) or None when the last non-empty line is not a verdict.

    Only the last line counts, so "VERDICT: EQUIVALENT" quoted inside reasoning does not.
    Reasoning in ``<think>`` blocks is dropped first.
    """
    text = re.sub(r"<think>.*?</think>", " ", text or "", flags=re.DOTALL | re.IGNORECASE)
    lines = [line for line in text.strip().splitlines() if line.strip()]
    if not lines:
        return None
    match = _VERDICT.match(lines[-1].strip())
    if not match:
        return None
    return match.group(1).upper() == "EQUIVALENT"
