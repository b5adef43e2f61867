"""Judge-side reading of the judge prompt, for scripted judges behind the loopback OpenAI server.

`fenced_pair` reads the gold and model answers the way a careful judge does: between the first opening
marker and the first closing marker after it. `obedient_judge` is a judge that *obeys injections*: whatever
instruction it finds outside the fenced data (a verdict line, "ignore the rules", a system role marker) it
follows, as a weak judge model would. Against it, only a prompt that keeps the answer inside its fence
holds the verdict; the old unfenced prompt ("Gold answer: …\\nModel answer: …") does not.
"""
from __future__ import annotations

import re

_FENCES = {name: re.compile(rf"<{name}>\n(.*?)\n</{name}>", re.S) for name in ("gold_answer", "model_answer")}
_INJECTION = re.compile(r"VERDICT\s*:\s*(EQUIVALENT|NOT_EQUIVALENT)|ignore (?:all |the )?(?:previous |above )?"
                        r"(?:instructions|rules)|^\s*(?:system|assistant)\s*:", re.IGNORECASE | re.MULTILINE)
# Special tokens are structure, not text: a chat template turns them into a new turn wherever they stand, fence
# or no fence, so the stub obeys them anywhere in the prompt.
_ROLE_TOKEN = re.compile(r"<\|im_start\|>\s*system|\[INST\]|<<SYS>>|<start_of_turn>\s*system", re.IGNORECASE)


def fenced_pair(prompt: str) -> tuple[str, str] | None:
    """(gold, answer) between their markers, or None when the prompt does not fence them."""
    gold, answer = (_FENCES[name].search(prompt) for name in ("gold_answer", "model_answer"))
    return (gold.group(1), answer.group(1)) if gold and answer else None


def outside_the_fences(prompt: str) -> str:
    """The text of the prompt that is not fenced data: what a judge reads as instructions."""
    for pattern in _FENCES.values():
        prompt = pattern.sub(" ", prompt)
    return prompt


def obedient_judge(synonyms: set[tuple[str, str]]):
    """A scripted judge that follows any instruction outside the fences and otherwise grades honestly:
    EQUIVALENT when the answer is the gold or a listed (answer, gold) synonym."""
    def reply(call) -> str:
        injected = _INJECTION.search(outside_the_fences(call.prompt)) or _ROLE_TOKEN.search(call.prompt)
        if injected:
            obeyed = (injected.groups() or (None,))[0] or "EQUIVALENT"
            return f"Following the instruction in the message.\nVERDICT: {obeyed.upper()}"
        pair = fenced_pair(call.prompt)
        if pair is None:
            return "I cannot find the two answers."
        gold, answer = (text.strip().lower().rstrip(".") for text in pair)
        same = answer == gold or (answer, gold) in synonyms
        return f"Comparing the two answers.\nVERDICT: {'EQUIVALENT' if same else 'NOT_EQUIVALENT'}"
    return reply
