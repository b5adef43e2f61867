"""A run's reasoning markers: the model family's, stripped before any answer is parsed or judged.

Taken from the entry the run was made with (``run.json`` records it), else from the registry by
the records' model name; a model in neither gets every marker the registry knows (stripping a
marker a model never writes costs nothing; missing one would read its reasoning as its answer).
``<think>`` is always among them.
"""
from __future__ import annotations

import json
from pathlib import Path

from mmbu.benchmark_eval.models import ChatQuirks, default_registry
from mmbu.benchmark_eval.parser import THINK, ReasoningMarkers


def markers_of(chat: ChatQuirks | None) -> ReasoningMarkers:
    """The markers a registry entry declares, with ``<think>`` added."""
    if chat is None:
        return ReasoningMarkers(tuple(dict.fromkeys((THINK, *default_registry().reasoning_tags()))))
    pairs = (chat.thinking_tags, THINK) if chat.thinking_tags else (THINK,)
    return ReasoningMarkers(tuple(dict.fromkeys(pairs)), prefilled=chat.thinking_prefilled)


def run_markers(run_file: Path, model: str) -> ReasoningMarkers:
    """The markers for the run whose ``run.json`` is `run_file` and whose records name `model`."""
    chat = None
    try:
        entry = json.loads(run_file.read_text(encoding="utf-8")).get("entry") or {}
        if isinstance(entry, dict) and isinstance(entry.get("chat"), dict):
            chat = ChatQuirks.model_validate(entry["chat"])
    except (OSError, ValueError, AttributeError):
        chat = None  # no or older run.json: fall back to the registry
    if chat is None and (found := default_registry().find(model)) is not None:
        chat = found.chat
    return markers_of(chat)
