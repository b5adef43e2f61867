"""Question prototypes as data (`prototypes.yaml`) and their instantiation from one row's metadata."""
from __future__ import annotations

import re
import string
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from mmbu.core.release import CLOSED_QUESTION_COLUMNS, QUESTION_COLUMNS, TASKS, TEMPLATES
from mmbu.core.yaml_io import read_yaml

PROTOTYPES_PATH = Path(__file__).with_name("prototypes.yaml")
TEMPLATE_COLUMNS = QUESTION_COLUMNS  # template -> its release column
HUMAN = "human"  # the specimen of clinical imaging, said by no question (the image is of a patient)


class StainPhrase(BaseModel):
    model_config = ConfigDict(extra="forbid")

    default: str
    by_modality: dict[str, str] = {}
    by_stain: dict[str, str] = {}  # a stain value's own phrase, over the modality's ("unstained": not "stained with")


class InVivo(BaseModel):
    model_config = ConfigDict(extra="forbid")

    modalities: list[str]
    except_: list[str] = Field(default=[], alias="except")


class Nouns(BaseModel):
    """Word lists for how a noun phrase counts (see `Prototypes.number`)."""

    model_config = ConfigDict(extra="forbid")

    mass: list[str]
    plural: list[str]
    singular: list[str]


class Prototypes(BaseModel):
    """The parsed prototype file; `render` turns one row's values into the three questions."""

    model_config = ConfigDict(extra="forbid")

    version: str
    none_of_the_above: str
    image_phrase: dict[str, list[list[str]]]
    generic_modality_words: list[str]
    in_vivo: InVivo
    nouns: Nouns
    stain_phrase: StainPhrase
    rewrites: dict[str, str] = {}
    tasks: dict[str, str]
    closed_tasks: dict[str, str] = {}

    def model_post_init(self, _context: object) -> None:
        missing = [t for t in TEMPLATES if t not in self.image_phrase] + [t for t in TASKS if t not in self.tasks]
        if missing:
            raise ValueError(f"question prototypes lack {', '.join(missing)}")

    def number(self, noun_phrase: str) -> Literal["one", "mass", "plural"]:
        """How a noun phrase counts, by its head word: "one" (a cell nucleus; a capitalised name such as a genus),
        "mass" (fat, connective tissue) or "plural" (seminal vesicles, overlapping nuclei)."""
        if noun_phrase[:1].isupper():
            return "one"
        head = noun_phrase.split(" of ")[0].split()[-1].casefold()
        if head in self.nouns.mass:
            return "mass"
        if head in self.nouns.plural or (head.endswith("s") and not head.endswith(("ss", "us", "is"))
                                         and head not in self.nouns.singular):
            return "plural"
        return "one"

    def in_vivo_imaging(self, modality: str | None, sub_modality: str | None) -> bool:
        """Whether the modality images a living patient (the specimen is then no "specimen")."""
        return modality in self.in_vivo.modalities and sub_modality not in self.in_vivo.except_

    def says_modality(self, sub_modality: str, modality: str) -> bool:
        """Whether a sub-modality's name says its modality already: a word of the modality's name that is not a
        generic one ("imaging", "microscopy") inside it ("spiral computed tomography", "epifluorescence")."""
        words = [w for w in modality.casefold().split() if w not in self.generic_modality_words]
        return any(word in sub_modality.casefold() for word in words)

    def phrases(self, values: Mapping[str, str | None]) -> dict[str, str | None]:
        """`values` with the phrases the prototypes build from them (see prototypes.yaml)."""
        values = dict(values)
        modality, sub_modality, specimen = values.get("modality"), values.get("sub_modality"), values.get("specimen")
        in_vivo = self.in_vivo_imaging(modality, sub_modality)
        if values.get("stain"):
            phrase = self.stain_phrase.by_stain.get(values["stain"]) or self.stain_phrase.by_modality.get(
                modality or "", self.stain_phrase.default)
            values["stain_phrase"] = _fill(phrase, values)
        if values.get("preparation"):
            values["a_preparation"] = with_article(values["preparation"])
        if specimen:
            values["a_specimen"] = None if in_vivo else with_article(specimen)
            values["a_subject"] = with_article(specimen) if in_vivo and specimen != HUMAN else None
        if modality and sub_modality:
            values["modality_aside"] = None if self.says_modality(sub_modality, modality) else modality
        values |= self._anatomy_phrases(values, after_preparation=False)
        target = values.get("target")
        if target:
            one = self.number(target) == "one"
            values["every_target"] = f"every {target}" if one else f"all {target}"
            values["a_target"] = f"{indefinite_article(target)} {target}" if one else target
        return values

    def _anatomy_phrases(self, values: Mapping[str, str | None], after_preparation: bool) -> dict[str, str | None]:
        """`the_anatomy` and `specimen_anatomy`: "the" before a countable anatomy right after the image ("of the
        human abdomen"), none after a preparation ("of a section of human colon")."""
        anatomy, specimen = values.get("anatomy"), values.get("specimen")
        if not anatomy:
            return {}
        the = "the " if not after_preparation and self.number(anatomy) == "one" else ""
        return {"the_anatomy": f"{the}{anatomy}", "specimen_anatomy": f"{the}{specimen} {anatomy}" if specimen else None}

    def image_description(self, template: str, values: Mapping[str, str | None]) -> str:
        """The image phrase of a template, dropping fragments whose values are missing."""
        values = self.phrases(values)
        parts: list[str] = []
        for alternatives in self.image_phrase[template]:
            so_far = self._rewrite("".join(parts)).casefold()
            for text in alternatives:
                if any(_said(so_far, name, values) for name in _placeholders(text)):
                    continue  # said already, e.g. specimen "tissue section" after preparation "tissue section"
                filled = _fill(text, values)
                if filled is not None:
                    parts.append(filled)
                    if "a_preparation" in _placeholders(text):
                        values |= self._anatomy_phrases(values, after_preparation=True)
                    break
        return self._rewrite("".join(parts))

    def _rewrite(self, text: str) -> str:
        for old, new in self.rewrites.items():
            text = text.replace(old, new)
        return text

    def render(self, task: str, values: Mapping[str, str | None]) -> dict[str, str | None]:
        """The three questions (keyed by release column) for a task and one row's values, and the three closed-form
        questions (`CLOSED_QUESTION_COLUMNS`): None where the closed form asks the template question."""
        questions: dict[str, str | None] = {}
        phrases = self.phrases(values)
        for template in TEMPLATES:
            phrases["image_phrase"] = self.image_description(template, values)
            for prototype, columns in ((self.tasks[task], TEMPLATE_COLUMNS),
                                       (self.closed_tasks.get(task), CLOSED_QUESTION_COLUMNS)):
                text = _fill(prototype, phrases) if prototype else None
                if prototype and text is None:
                    raise ValueError(f"the {task} prototype needs values it was not given: {prototype!r}")
                questions[columns[template]] = " ".join(text.split()) if text else None
        return questions


def _placeholders(text: str) -> list[str]:
    return [name for _, name, _, _ in string.Formatter().parse(text) if name]


# the metadata values a derived phrase says (it counts as said when one of them is)
_SOURCES = {"a_preparation": ("preparation",), "a_specimen": ("specimen",), "a_subject": ("specimen",),
            "stain_phrase": ("stain",), "specimen_anatomy": ("specimen", "anatomy"), "the_anatomy": ("anatomy",),
            "modality_aside": ("modality",)}


def _said(text: str, name: str, values: Mapping[str, str | None]) -> bool:
    """Whether `text` already says the value of a placeholder: the value itself, or for the specimen its head noun
    (specimen "blood smear" after preparation "smear", so not "of a smear of blood smear blood")."""
    for source in _SOURCES.get(name, (name,)):
        value = str(values.get(source) or "").casefold()
        if _mentions(text, value) or (value and source == "specimen" and _mentions(text, value.split()[-1])):
            return True
    return False


def _mentions(text: str, value: str) -> bool:
    return bool(value) and re.search(rf"(?<!\w){re.escape(value)}(?!\w)", text) is not None


# words spelt with a vowel but said with a consonant ("a urine sediment"), and the reverse ("an hour", "an L-hook",
# "an x-ray": a letter said with a vowel sound)
_CONSONANT_SOUND = re.compile(r"(?:uni|use|usu|ura|ure|uri|uro|uti|eu|ewe|one\b|once\b)", re.IGNORECASE)
_VOWEL_SOUND = re.compile(r"(?:(?i:hour|honest|honou?r|heir|x-ray)|[FHLMNRSX](?=-))")


def with_article(noun_phrase: str) -> str:
    """"a smear", "an imprint", "a urine sediment", "cultured cells": a rough English rule, good for preparation
    and specimen names."""
    last = noun_phrase.split()[-1].casefold()
    if last.endswith("s") and not last.endswith(("ss", "us", "is")):
        return noun_phrase
    return f"{indefinite_article(noun_phrase)} {noun_phrase}"


def indefinite_article(noun_phrase: str) -> str:
    """"an" before a vowel sound ("an imprint", "an hour", "an L-hook"), else "a" ("a urine sediment")."""
    vowel = (noun_phrase[:1].casefold() in "aeiou" and not _CONSONANT_SOUND.match(noun_phrase)) or bool(
        _VOWEL_SOUND.match(noun_phrase))
    return "an" if vowel else "a"


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
