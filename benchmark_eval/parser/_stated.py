"""Answers given by an option's text alone, in a sentence ("The cell type pictured is a monocyte.").

Read only when the reply names no option anywhere else, by one of four readers:

* ``stated_text``   exactly one option's text occurs in the whole reply, and it occurs as what something *is*
  ("… is a monocyte.", "… ist 114.64 mm.", "… is equal to 70°.", "… is "Chanel No. 5 perfume".");
* ``first_sentence`` the reply's first sentence is exactly one option's text ("True. The painting is …");
* ``first_clause``   the reply's first clause is exactly one option's text ("No, Magenta is not greater …",
  "Yes, there are fewer …"), unless the sentence goes on to refuse or to speak of the model itself;
* ``single_mention`` a short reply (two sentences at most) names exactly one option's text, not negated
  ("A decrease in sunlight would directly affect the grasshopper, as …");
* ``concluded_text`` the reply's last sentence states one option's text as what something is, after a reply that
  also discusses the other options ("… Therefore, the most likely diagnosis is roseola.", "… the most appropriate
  next step is to obtain a radiograph.", "… we can conclude that osteoporosis is the most likely diagnosis."),
  unless the reply ranks the options ("The next most likely diagnosis is …") or an earlier "Therefore, …" sentence
  concluded on another option.

An option's text counts as named where it is not merely part of a longer option's text named at the same place
("6" inside "6*√3"). LaTeX and plain math are one text (`$30^{\\circ}$` is 30°, `\\frac{4}{3}` is 4/3, see
`plain_math`). A reply that names two options' texts, negates ("is not a monocyte") or qualifies the text
("monocyte-like") is not read. Texts shorter than three characters are searched for only when they are numbers.

:func:`last_stated_value` and :func:`value_stated_just_before` serve the strict side: the option whose value a
reply states last, or states in the sentence just before its letter, so that a letter contradicted by the value the
reply concludes on is not taken (see `_closed`).
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache

from mmbu.benchmark_eval.parser._labels import Resolution, option_by_text, option_labels
from mmbu.benchmark_eval.parser._text import plain_math

_MIN_TEXT = 3
_COPULA = (r"(?<![A-Za-z])(?:(?:is|was|are|be|ist|sind|est|es|是|为|為)\s+(?:equal\s+to\s+)?|equals\s+)"
           r"(?:(?:a|an|the|indeed|likely|probably|approximately|about)\s+)*")
_OPEN_QUOTE = r"[\"'“‘«]?"
_END = r"[\"'”’»]?(?=\s*(?:[.,;:!?)。，；]|$|(?:which|that|because|since|with|as|and it)\b))"
_FIRST_SENTENCE = re.compile(r"^\s*([^.!?。\n]{1,80}?)[.!?。](?:\s|$)")
_FIRST_CLAUSE = re.compile(r"^\s*([^,.;:!?。，；\n]{1,40}?)\s*[,，;:—-]\s*([^.!?。\n]*)")
# what a reply that does not answer says in its first sentence ("No, I cannot tell from this image")
_NOT_AN_ANSWER = re.compile(r"^(?:i|i'm|i am|i'd|we|you|let|let's|here|sure|as an|thank|sorry|please)\b|"
                            r"\b(?:cannot|can't|can not|unable|not possible|impossible|not sure|unclear|sorry|"
                            r"not enough|insufficient|depends)\b", re.IGNORECASE)
_NEGATED = re.compile(r"\b(?:not|n't|no|never|neither|nor|rather than|instead of|unlike|except|without|other than)\b"
                      r"[^.!?;,\n]*$", re.IGNORECASE)
_SENTENCE_END = re.compile(r"[.!?。](?:\s|$)")
_SHORT_REPLY = 300
_FIRST_PERSON = re.compile(r"(?<![\w(])I(?:'m|'d|'ll|’m)?\s")  # "Yes, I can help with that." speaks of itself
_AGAINST = re.compile(r"^[\s:,\-–—]*(?:is\s+|seems\s+|would\s+be\s+)?(?:not|unlikely|incorrect|wrong|false|excluded|"
                      r"ruled\s+out|less\s+likely)\b", re.IGNORECASE)
# a program the model wrote instead of answering ("if a < b:\n    return 'Yes'") names option texts as strings
_CODE = re.compile(r"^\s*(?:def|import|from|return|print|if|elif|else|for|while|class)\b|\bprint\(|==|\w\s*=\s*\S",
                   re.MULTILINE)
_TOKEN = re.compile(r"\d+|[^\W\d_]+|√")  # √ is not punctuation: √3 is not 3


@lru_cache(maxsize=1 << 14)  # option texts repeat across samples in any order
def _text_pattern(text: str) -> re.Pattern[str] | None:
    """An option's text as a pattern (words joined by any punctuation or none), or None if too short."""
    words = _TOKEN.findall(plain_math(text))  # "114.64mm" → 114, 64, mm: matches "114.64 mm" too
    joined = "".join(words)
    if len(joined) < _MIN_TEXT and not joined.isdigit():
        return None
    # a number is not the start or end of a longer one: "15" is not stated by "15.5" nor by "2.15"
    # words joined by punctuation or none, or by an article the option leaves out ("around the umbilicus" for
    # "Around umbilicus", "dorsum of the arm" for "Dorsum of arm")
    joiner = r"(?:[\W_]*|\s+(?:the|a|an)\s+)" if any(w.isalpha() for w in words) else r"[\W_]*"
    return re.compile(r"(?<!\w)(?<!\d[.,])" + joiner.join(re.escape(w) for w in words) + r"(?!\w|[.,]\d)",
                      re.IGNORECASE)


@lru_cache(maxsize=1 << 14)
def _stated_pattern(text: str) -> re.Pattern[str]:
    """The option's text as what something is: "… is a monocyte.", "… ist 114.64 mm."."""
    return re.compile(_COPULA + _OPEN_QUOTE + _body(text) + _END, re.IGNORECASE)


def _body(text: str) -> str:
    """The option's text pattern without its word boundaries, then a unit sign it may carry ("27°", "30 %")."""
    pattern = _text_pattern(text).pattern.removeprefix(r"(?<!\w)(?<!\d[.,])").removesuffix(r"(?!\w|[.,]\d)")
    return pattern + r"(?![.,]\d)(?:\s?[°%‰′″]|\s+degrees?\b)?"


def _named(text: str, options: Sequence[str]) -> list[int]:
    """The options whose text occurs in `text`, not only inside a longer option's text named at the same place."""
    spans: dict[int, list[tuple[int, int]]] = {}
    for index, option in enumerate(options):
        pattern = _text_pattern(option)
        if pattern is not None:
            found = [m.span() for m in pattern.finditer(text)]
            if found:
                spans[index] = found
    named = []
    for index, found in spans.items():
        inside = {(start, end) for other, theirs in spans.items() if other != index
                  for start, end in found for s, e in theirs if s <= start and end <= e and (s, e) != (start, end)}
        if any(span not in inside for span in found):
            named.append(index)
    return named


def stated_text(text: str, options: Sequence[str]) -> Resolution | None:
    """The option whose text the reply states as its answer (see the module docstring), or None."""
    named = _named(text, options)
    if len(named) != 1:
        return None
    if _stated_pattern(options[named[0]]).search(text):
        return Resolution(option_labels(len(options))[named[0]], "stated_text")
    return None


# a program the model wrote instead of answering ("angle_2 = 60\nprint(angle_2)"): its "=" states no answer
_PROGRAM = re.compile(r"^\s*(?:def|import|from|return|print|class)\b|\bprint\(", re.MULTILINE)
_UNIT_WORDS = r"(?:\s*[^\W\d_]+(?:\s+[^\W\d_]+){0,2})?"  # "10 meters", "15 nautical miles", "5π cm"


def unit_free(options: Sequence[str]) -> tuple[str, ...] | None:
    """The options' values without the unit they all share ("10m", "20m" → "10", "20"; "4.40米" → "4.40"), or None
    when they share none: a unit every option carries tells no option apart, so a reply may name it its own way."""
    texts = [plain_math(option).strip() for option in options]
    if len(texts) < 2:
        return None
    suffix = texts[0]
    for text in texts[1:]:
        while not text.endswith(suffix):
            suffix = suffix[1:]
    suffix = suffix.lstrip("0123456789., ")  # "10m", "20m" share "0m": the unit is "m"
    values = tuple(text[:len(text) - len(suffix)].strip() for text in texts)
    if not re.search(r"[^\W\d_]", suffix) or not all(re.search(r"\d", value) for value in values):
        return None
    return values


def stated_value(text: str, options: Sequence[str]) -> Resolution | None:
    """The option whose value the reply's last sentence states as what something is, with "=" too ("∴ ∠BDC = 35°",
    "… ∠C = 85°.") and in the reply's own words for the unit all options share ("… is 10 meters." for "10m"), when
    the reply names no other option's value anywhere."""
    if _PROGRAM.search(text):
        return None
    sentences = [m.group().strip() for m in _SENTENCE.finditer(text) if re.search(r"\w", m.group())]
    if not sentences:
        return None
    free = unit_free(options)
    for values, unit in ((tuple(options), ""), *(((free, _UNIT_WORDS),) if free else ())):
        named = _named(text, values)
        if len(named) != 1:
            continue
        statement = re.compile(r"(?:" + _COPULA + r"|=\s*|(?<![A-Za-z])(?:remains|becomes)\s+)" + _OPEN_QUOTE
                               + _body(values[named[0]]) + unit + _END, re.IGNORECASE)
        found = statement.search(sentences[-1])  # the statement ends the sentence: "…, so there is no answer." does not
        if found and re.fullmatch(r"[\W_]*", sentences[-1][found.end():]) \
                and not _NEGATED.search(sentences[-1][:found.start()][-80:]):
            return Resolution(option_labels(len(options))[named[0]], "stated_text")
    return None


def first_sentence(text: str, options: Sequence[str]) -> Resolution | None:
    """The reply's first sentence when it is exactly one option's text ("True. The name of …")."""
    match = _FIRST_SENTENCE.match(text)
    # "No. 11: [Image 17] …" numbers a question; it does not answer "no"
    if not match or len(re.sub(r"\W", "", match.group(1))) < _MIN_TEXT or text[match.end():match.end() + 1].isdigit():
        return None
    label = option_by_text(match.group(1), options)
    return Resolution(label, "first_sentence") if label is not None else None


def first_clause(text: str, options: Sequence[str]) -> Resolution | None:
    """The reply's first clause when it is exactly one option's text ("No, Magenta is not greater …")."""
    match = _FIRST_CLAUSE.match(text)
    if not match or _NOT_AN_ANSWER.search(match.group(2)):
        return None
    label = option_by_text(match.group(1), options)
    return Resolution(label, "first_clause") if label is not None else None


def single_mention(text: str, options: Sequence[str]) -> Resolution | None:
    """In a short reply, the one option whose text it names, not negated (see the module docstring)."""
    if len(text) > _SHORT_REPLY or len(_SENTENCE_END.findall(text.strip())) > 2 or "?" in text:
        return None
    if _NOT_AN_ANSWER.search(text) or _CODE.search(text) or _FIRST_PERSON.search(text):
        return None
    named = _named(text, options)
    if len(named) != 1 or _LABEL_IN_CLAUSE.search(text):
        return None  # a reply that names letters is read by its letters, or not at all
    body = _body(options[named[0]])
    # the text as a whole word group ("monocyte-like", "HER2-" are other things), not negated before or after
    mention = re.search(r"(?<![\w+\-])" + body + _END, text, re.IGNORECASE)
    if mention is None or _NEGATED.search(text[max(0, mention.start() - 80):mention.start()]):
        return None
    if _AGAINST.match(text[mention.end():]):
        return None
    return Resolution(option_labels(len(options))[named[0]], "single_mention")


# "… is to obtain a radiograph …": the next step stated as what to do
_CONCLUDING_COPULA = _COPULA[:-len(r"(?:(?:a|an|the|indeed|likely|probably|approximately|about)\s+)*")] + \
    r"(?:(?:a|an|the|to|indeed|likely|probably|approximately|about)\s+)*"
# "osteoporosis is the most likely diagnosis": the text first, then the verdict on it
_VERDICT_AFTER = (r"\s+(?:is|would\s+be|seems\s+to\s+be|appears\s+to\s+be)\s+(?:the\s+)?"
                  r"(?:correct|right|best|most\s+(?:likely|appropriate|probable|accurate|suitable|plausible))\b")
# "The next most likely diagnosis is …", "The second most important factor is …": the options ranked, not chosen
_RANKING = re.compile(r"\b(?:next|second|third|fourth|fifth)\s+(?:most|least)\b", re.IGNORECASE)
_CONCLUDING_START = re.compile(r"^\W*(?:therefore|thus|hence|so|consequently|in\s+conclusion)\b", re.IGNORECASE)
_SENTENCE = re.compile(r"[^.!?。\n]+(?:[.!?。]+(?=\s|$)|$)|[^\n]+", re.MULTILINE)


@lru_cache(maxsize=1 << 14)
def _concluding_pattern(text: str) -> re.Pattern[str]:
    body = _body(text)
    return re.compile(r"(?:" + _CONCLUDING_COPULA + _OPEN_QUOTE + body + _END + r"|(?<![\w+\-])" + body + _VERDICT_AFTER + r")",
                      re.IGNORECASE)


def _concluded_in(sentence: str, options: Sequence[str]) -> int | None:
    """The option whose text `sentence` states last as what something is, if no other option is named after it."""
    last: tuple[int, int] | None = None
    for index, option in enumerate(options):
        if _text_pattern(option) is None:
            continue
        for match in _concluding_pattern(option).finditer(sentence):
            if _NEGATED.search(sentence[max(0, match.start() - 80):match.start()]):
                continue
            if last is None or match.start() > last[0]:
                last = (match.start(), index)
    if last is None:
        return None
    after = sentence[last[0]:]
    named_after = [i for i in _named(after, options) if i != last[1]]
    return None if named_after else last[1]


def concluded_text(text: str, options: Sequence[str]) -> Resolution | None:
    """The option whose text the reply's last sentence states as its conclusion (see the module docstring)."""
    if _RANKING.search(text) or _CODE.search(text):
        return None
    sentences = [m.group().strip() for m in _SENTENCE.finditer(text) if re.search(r"\w", m.group())]
    if not sentences or "?" in sentences[-1]:
        return None
    concluded = _concluded_in(sentences[-1], options)
    if concluded is None:
        return None
    for sentence in sentences[:-1]:  # "Therefore, it is a malignant neoplasm. … Therefore, it is an inflammatory disease."
        if _CONCLUDING_START.match(sentence) and (earlier := _concluded_in(sentence, options)) not in (None, concluded):
            return None
    return Resolution(option_labels(len(options))[concluded], "concluded_text")


def value_stated_just_before(text: str, options: Sequence[str], position: int) -> int | None:
    """The option whose value the sentence just before the one at `position` states as a result, or None.

    "Therefore, the minimum number of copper coins she could have brought is 2.\nTherefore, among A through E,
    the answer is B.": that sentence is the reply's conclusion, and a letter after it that is another option's is
    contradicted by it. Only the one sentence before counts: a derivation states other options' values earlier.
    """
    starts = [0] + [m.end() for m in _BOUNDARY.finditer(text, 0, position)]
    sentences = [(a, b) for a, b in zip(starts, starts[1:] + [position]) if text[a:b].strip()]
    if len(sentences) < 2:
        return None
    start, end = sentences[-2]
    stated = last_stated_value(text[:end], options, start)
    return stated[1] if stated is not None else None


_BOUNDARY = re.compile(r"[.!?。](?=\s)|\n")


def last_stated_value(text: str, options: Sequence[str], after: int) -> tuple[int, int] | None:
    """(position, option index) of the last option value the reply states after position `after`, or None.

    A value is stated as what something is ("… is 27°", "… equals 3"); a statement whose clause names an
    option by its letter ("(A) 30° is wrong", "option B is 40") speaks of that option, not of the answer.
    """
    last: tuple[int, int] | None = None
    for index, option in enumerate(options):
        if _text_pattern(option) is None:
            continue
        for match in _stated_pattern(option).finditer(text, after):
            clause = text[max(after, match.start() - 80):match.start()]
            clause = re.split(r"[.!?;\n。；]", clause)[-1]
            if _LABEL_IN_CLAUSE.search(clause) or _NEGATED.search(clause + " "):
                continue
            if last is None or match.start() > last[0]:
                last = (match.start(), index)
    return last


_LABEL_IN_CLAUSE = re.compile(r"[(\[][A-Z][)\]]|\b(?:option|choice|answer)\s+[A-Z]\b|(?<![\w'])[A-Z]\)", re.IGNORECASE)
