"""Optional help from an OpenAI-compatible LLM: extra search synonyms per leaf, and a relevance judgement.

Requests go through the polite `PoliteSession` (a few dozen per run), in the chat-completions format of
`mmbu.core.chat` that the evaluation's client speaks too.

Every answer is cached on disk under a key made of the taxonomy hash, the model and the prompt, so a
rerun (or a test) gets the same answers without the server. The agent works fully without an LLM.
"""
from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

from mmbu.core.chat import chat_body, chat_url, read_chat_answer
from mmbu.core.files import write_text_atomic
from mmbu.curation.http import HttpError, PoliteSession
from mmbu.curation.sources.candidate import Candidate

SYNONYM_PROMPT = (
    "You help search public data repositories for biomedical imaging datasets. Give up to {n} other names or "
    "spellings that dataset authors use for the imaging sub-modality \"{term}\" (a kind of {modality}). "
    "Answer with a JSON list of strings only."
)
RELEVANCE_PROMPT = (
    "Does this dataset contain labelled {modality} images of the kind \"{term}\"? Title: {title}. "
    "Description: {description}. Answer with one number from 0 (no) to 10 (certainly)."
)


class LlmHelper:
    def __init__(self, session: PoliteSession, base_url: str, model: str, api_key: str | None,
                 cache_file: Path, taxonomy_hash: str):
        self.session = session
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.api_key = api_key
        self.cache_file = cache_file
        self.taxonomy_hash = taxonomy_hash
        self.problems: list[str] = []
        try:
            self._cache: dict[str, str] = json.loads(cache_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            self._cache = {}

    def _key(self, prompt: str) -> str:
        return hashlib.sha256(f"{self.taxonomy_hash}\n{self.model}\n{prompt}".encode()).hexdigest()

    def ask(self, prompt: str) -> str | None:
        """The model's answer (cached); None, with a problem recorded, if the server fails."""
        key = self._key(prompt)
        if key in self._cache:
            return self._cache[key]
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        body = chat_body(self.model, [{"role": "user", "content": prompt}], temperature=0)
        try:
            answer = self.session.request_json("POST", chat_url(self.base_url), json=body, headers=headers,
                                               use_cache=False).data
            text = read_chat_answer(answer).text
        except (HttpError, ValueError) as exc:
            self.problems.append(f"llm: no answer from {self.base_url} ({exc}); continuing without it")
            return None
        self._cache[key] = text
        write_text_atomic(self.cache_file, json.dumps(self._cache, indent=1, sort_keys=True))
        return text

    def synonyms(self, term: str, modality: str, n: int = 5) -> list[str]:
        text = self.ask(SYNONYM_PROMPT.format(n=n, term=term, modality=modality))
        if not text:
            return []
        match = re.search(r"\[.*\]", text, re.DOTALL)
        try:
            values = json.loads(match.group(0)) if match else []
        except ValueError:
            values = []
        return [str(v).strip() for v in values if isinstance(v, str) and v.strip()][:n]

    def relevance(self, candidate: Candidate, term: str, modality: str) -> float | None:
        """0..1, or None when the model gives no number."""
        prompt = RELEVANCE_PROMPT.format(modality=modality, term=term, title=candidate.title,
                                         description=candidate.description[:800])
        text = self.ask(prompt)
        number = re.search(r"\b(10|\d)(?:\.\d+)?\b", text or "")
        return min(1.0, float(number.group(0)) / 10) if number else None
