"""Wording a clinician would sign: rules over a dataset's instantiated questions, its options and its accepted
aliases, each a check the catalogue's tests run over every template and label (the prototypes are written to pass
them; a manifest's question fields are worded to pass them).

    article         "a"/"an" as said ("an L-hook", "a urine sediment"); a countable anatomy right after the image
                    takes "the" ("of the human abdomen", not "of human abdomen")
    number          detection asks for "every" of a countable target and "all" of a mass noun or plural ("every
                    cell nucleus", "all fat"); its closed form for "a" countable one ("a cell nucleus")
    specimen        no "specimen" for imaging of a living patient ("this fundus photograph from a human specimen")
    modality_twice  the image description says its modality once ("structural magnetic resonance image (magnetic
                    resonance imaging)", "of a T1-weighted magnetic resonance slice" after "magnetic resonance image")
    picture         the preparation is what the picture shows, not the picture ("of a laparoscopic video frame")
    options_noun    the options noun fits every option ("Which finding ...?" over portal vein, gallbladder)
    alias           no folder or file name among the accepted answers (`marked_lesion`, `hematoxylin_and_eosin`)
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from mmbu.build.questions.prototypes import Prototypes, load_prototypes
from mmbu.core.release import CLOSED_QUESTION_COLUMNS, QUESTION_COLUMNS, Task
from mmbu.core.yaml_io import read_yaml
from mmbu.curation.manifest import DatasetManifest
from mmbu.taxonomy.model import Taxonomy

RULES_PATH = Path(__file__).with_name("wording_rules.yaml")
RULES = ("article", "number", "specimen", "modality_twice", "picture", "options_noun", "alias")

A_BEFORE_A_VOWEL = re.compile(r"\ba (?!uni|use|usu|ura|ure|uri|uro|uti|eu|one\b)[aeiou]\w*", re.IGNORECASE)
AN_BEFORE_A_CONSONANT = re.compile(r"\ban (?!hour|honest|heir|x-ray|[fhlmnrsx]-)[b-df-hj-np-tv-z]\w*", re.IGNORECASE)
FILE_NAME = re.compile(r"[_/\\]|\.[A-Za-z0-9]{2,4}$")
DESCRIPTION = " in this "  # every template question ends with "... in this <image description>"


@dataclass(frozen=True)
class WordingProblem:
    rule: str  # one of RULES
    text: str  # the question, options noun or alias at fault
    detail: str


@lru_cache(maxsize=2)
def _rules(path: str) -> dict[str, list[str]]:
    return read_yaml(path)


def description(question: str) -> str:
    """The image description a question ends with ("this ... image of ..."), or the whole question."""
    at = question.rfind(DESCRIPTION)
    return question[at + 1:] if at >= 0 else question


def _value(row: Mapping[str, object], name: str) -> str | None:
    value = row.get(name)
    return value if isinstance(value, str) and value else None


def _strings(value: object) -> list[str]:
    """A list column's value (a list, or an array after a Parquet round trip; None when unused) as a list."""
    return [] if value is None else [str(v) for v in value]  # type: ignore[union-attr]


def article_problems(question: str, row: Mapping[str, object], prototypes: Prototypes) -> list[str]:
    found = [f"{m.group(0)!r}" for pattern in (A_BEFORE_A_VOWEL, AN_BEFORE_A_CONSONANT)
             for m in pattern.finditer(question)]
    anatomy, specimen = _value(row, "specimen_subregion"), _value(row, "specimen")
    if anatomy and prototypes.number(anatomy) == "one":
        specimen_words = rf"(?:{re.escape(specimen)} )?" if specimen else ""
        bare = re.search(rf"\b(?:image|photograph)(?: \([^)]*\))? of {specimen_words}{re.escape(anatomy)}\b",
                         question, flags=re.IGNORECASE)
        if bare:
            found.append(f"{bare.group(0)!r} wants \"the\" before the {anatomy}")
    return found


def number_problems(question: str, closed: bool, target: str, prototypes: Prototypes) -> list[str]:
    one = prototypes.number(target) == "one"
    if closed:
        asked = re.match(rf"Which box contains (an? )?{re.escape(target)} in ", question)
        if asked is None:
            return [f"the closed detection question does not ask which box contains {target!r}"]
        return [] if bool(asked.group(1)) == one else [f"{target!r} {'wants' if one else 'takes no'} an article"]
    asked = re.match(rf"Locate (every|all) {re.escape(target)} in ", question)
    if asked is None:
        return [f"the detection question does not ask to locate {target!r}"]
    wanted = "every" if one else "all"
    return [] if asked.group(1) == wanted else [f"{asked.group(1)!r} {target!r}: {wanted!r} is what it takes"]


def specimen_problems(question: str, row: Mapping[str, object], prototypes: Prototypes) -> list[str]:
    in_vivo = prototypes.in_vivo_imaging(_value(row, "modality"), _value(row, "sub_modality"))
    target = _value(row, "target")  # a class may be called so ("specimen bag"): the dataset's word, not ours
    said = question.replace(target, "") if target else question
    return ["a living patient is no specimen"] if in_vivo and re.search(r"\bspecimen\b", said) else []


def modality_twice_problems(question: str, row: Mapping[str, object], prototypes: Prototypes) -> list[str]:
    modality = _value(row, "modality")
    if not modality:
        return []
    said = description(question).casefold()
    return [f"{word!r} said {said.count(word)} times" for word in modality.casefold().split()
            if word not in prototypes.generic_modality_words and said.count(word) > 1]


def picture_problems(question: str, rules: Mapping[str, list[str]]) -> list[str]:
    nouns = "|".join(re.escape(noun) for noun in rules["picture_nouns"])
    found = re.search(rf"\bof an? [^,?.]*\b(?:{nouns})\b", description(question))
    return [f"{found.group(0)!r} names the picture, not what it shows"] if found else []


def head(noun_phrase: str) -> str:
    return noun_phrase.split(" of ")[0].split()[-1].casefold()


def options_noun_problems(options_name: str, options: Iterable[str], taxonomy: Taxonomy,
                          rules: Mapping[str, list[str]]) -> list[str]:
    """Options that the options noun does not name: only a noun of findings alone is checked ("brain finding";
    "structure or finding" names both)."""
    words = options_name.casefold().split()
    if " or " in f" {options_name} " or not set(words) & set(rules["finding_nouns"]):
        return []
    found = []
    for option in options:
        first = option.casefold().split()[0]
        anatomy = "anatomy" in taxonomy.facets and (
            taxonomy.resolve("anatomy", option) is not None or taxonomy.resolve("anatomy", head(option)) is not None)
        if first in rules["not_finding_words"] or head(option) in rules["not_findings"] or anatomy:
            found.append(f"{option!r} is no {options_name}")
    return found


def alias_problems(aliases: Iterable[str]) -> list[str]:
    return [f"{alias!r} is a folder or file name" for alias in aliases if FILE_NAME.search(alias)]


def wording_problems(rows: Iterable[Mapping[str, object]], manifest: DatasetManifest, taxonomy: Taxonomy,
                     prototypes: Prototypes | None = None, rules_path: str | Path | None = None
                     ) -> list[WordingProblem]:
    """Every problem of one dataset's rows, each distinct text once: `QuestionRow.record()`s, or a release's rows
    (`DataFrame.to_dict(orient="records")`)."""
    prototypes = prototypes or load_prototypes()
    rules = _rules(str(rules_path or RULES_PATH))
    problems: dict[tuple[str, str, str], None] = {}

    def add(rule: str, text: str, details: Iterable[str]) -> None:
        for detail in details:
            problems[rule, text, detail] = None

    seen: set[tuple[object, ...]] = set()
    offered: set[str] = set()
    for row in rows:
        detection = row.get("task") == Task.DETECTION
        if not detection:
            offered |= {o for o in _strings(row.get("options")) if o != prototypes.none_of_the_above}
            aliases = _strings(row.get("answer_aliases"))
            add("alias", ", ".join(aliases), alias_problems(aliases))
        asked = [(q, False) for q in (row.get(c) for c in QUESTION_COLUMNS.values())]
        asked += [(q, True) for q in (row.get(c) for c in CLOSED_QUESTION_COLUMNS.values())]
        for question, closed in asked:
            key = (question, closed, *(_value(row, n) for n in ("target", "modality", "sub_modality", "specimen",
                                                                 "specimen_subregion")))
            if not isinstance(question, str) or key in seen:
                continue
            seen.add(key)
            add("article", question, article_problems(question, row, prototypes))
            add("specimen", question, specimen_problems(question, row, prototypes))
            add("modality_twice", question, modality_twice_problems(question, row, prototypes))
            add("picture", question, picture_problems(question, rules))
            if detection and _value(row, "target"):
                add("number", question, number_problems(question, closed, row["target"], prototypes))
    if manifest.questions.options_name:
        add("options_noun", manifest.questions.options_name,
            options_noun_problems(manifest.questions.options_name, sorted(offered), taxonomy, rules))
    return [WordingProblem(rule, text, detail) for rule, text, detail in problems]
