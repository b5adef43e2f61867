"""Question prototypes as data (`prototypes.yaml`) and their instantiation from one row's metadata."""
from __future__ import annotations

import re
import string
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from mmbu.core.release import QUESTION_COLUMNS, TASKS, TEMPLATES
from mmbu.core.yaml_io import read_yaml

PROTOTYPES_PATH = Path(__file__).with_name("prototypes.yaml")
TEMPLATE_COLUMNS = QUESTION_COLUMNS  # template -> its release column


class StainPhrase(BaseModel):
    model_config = ConfigDict(extra="forbid")

    default: str
    by_modality: dict[str, str] = {}
    by_stain: dict[str, str] = {}  # a stain value's own phrase, over the modality's ("unstained": not "stained with")


class Prototypes(BaseModel):
    """The parsed prototype file; `render` turns one row's values into the three questions."""

    model_config = ConfigDict(extra="forbid")

    version: str
    none_of_the_above: str
    image_phrase: dict[str, list[list[str]]]
    stain_phrase: StainPhrase
    rewrites: dict[str, str] = {}
    tasks: dict[str, str]

    def model_post_init(self, _context: object) -> None:
        missing = [t for t in TEMPLATES if t not in self.image_phrase] + [t for t in TASKS if t not in self.tasks]
        if missing:
            raise ValueError(f"question prototypes lack {', '.join(missing)}")

    def image_description(self, template: str, values: Mapping[str, str | None]) -> str:
        """The image phrase of a template, dropping fragments whose values are missing."""
        values = dict(values)
        if values.get("stain"):
            phrase = self.stain_phrase.by_stain.get(values["stain"]) or self.stain_phrase.by_modality.get(
                values.get("modality") or "", self.stain_phrase.default)
            values["stain_phrase"] = _fill(phrase, values)
        for name in ("preparation", "specimen"):
            if values.get(name):
                values[f"a_{name}"] = with_article(values[name])
        parts: list[str] = []
        for alternatives in self.image_phrase[template]:
            so_far = self._rewrite("".join(parts)).casefold()
            for text in alternatives:
                if any(_said(so_far, name, values) for name in _placeholders(text)):
                    continue  # said already, e.g. specimen "tissue section" after preparation "tissue section"
                filled = _fill(text, values)
                if filled is not None:
                    parts.append(filled)
                    break
        return self._rewrite("".join(parts))

    def _rewrite(self, text: str) -> str:
        for old, new in self.rewrites.items():
            text = text.replace(old, new)
        return text

    def render(self, task: str, values: Mapping[str, str | None]) -> dict[str, str]:
        """The three questions (keyed by release column) for a task and one row's values."""
        questions = {}
        for template in TEMPLATES:
            text = _fill(self.tasks[task], {**values, "image_phrase": self.image_description(template, values)})
            if text is None:
                raise ValueError(f"the {task} prototype needs values it was not given: {self.tasks[task]!r}")
            questions[TEMPLATE_COLUMNS[template]] = " ".join(text.split())
        return questions


def _placeholders(text: str) -> list[str]:
    return [name for _, name, _, _ in string.Formatter().parse(text) if name]


_SOURCES = {"a_preparation": "preparation", "a_specimen": "specimen", "stain_phrase": "stain"}


def _base_value(name: str, values: Mapping[str, str | None]) -> str:
    """The metadata value a placeholder stands for (derived phrases count as their source field)."""
    return str(values.get(_SOURCES.get(name, name)) or "").casefold()


def _said(text: str, name: str, values: Mapping[str, str | None]) -> bool:
    """Whether `text` already says the value of a placeholder: the value itself, or for the specimen its head noun
    (specimen "blood smear" after preparation "smear", so not "of a smear of blood smear blood")."""
    value = _base_value(name, values)
    if _mentions(text, value):
        return True
    return bool(value) and _SOURCES.get(name, name) == "specimen" and _mentions(text, value.split()[-1])


def _mentions(text: str, value: str) -> bool:
    return bool(value) and re.search(rf"(?<!\w){re.escape(value)}(?!\w)", text) is not None


# words spelt with a vowel but said with a consonant ("a urine sediment"), and the reverse ("an hour")
_CONSONANT_SOUND = re.compile(r"(?:uni|use|usu|ura|ure|uri|uro|uti|eu|ewe|one\b|once\b)", re.IGNORECASE)
_VOWEL_SOUND = re.compile(r"(?:hour|honest|honou?r|heir)", re.IGNORECASE)


def with_article(noun_phrase: str) -> str:
    """"a smear", "an imprint", "a urine sediment", "cultured cells": a rough English rule, good for preparation
    and specimen names."""
    last = noun_phrase.split()[-1].casefold()
    if last.endswith("s") and not last.endswith(("ss", "us", "is")):
        return noun_phrase
    vowel = (noun_phrase[:1].casefold() in "aeiou" and not _CONSONANT_SOUND.match(noun_phrase)) or bool(
        _VOWEL_SOUND.match(noun_phrase))
    return f"{'an' if vowel else 'a'} {noun_phrase}"


def _fill(text: str, values: Mapping[str, str | None]) -> str | None:
    """`text` with its placeholders filled, or None when one of them has no value."""
    names = _placeholders(text)
    if any(not values.get(name) for name in names):
        return None
    return text.format_map({name: values[name] for name in names})


@lru_cache(maxsize=4)
def load_prototypes(path: str | Path | None = None) -> Prototypes:
    """Read a prototype file (the bundled one by default)."""
    source = Path(path) if path else PROTOTYPES_PATH
    return Prototypes.model_validate(read_yaml(source))
