"""Read one candidate answer (a field value, a tag body, the words after "the answer is") as an option label.

A candidate names an option by its letter ("C", "(C)", "C) the nucleus", "C because …") or by the
option's exact text ("Monocyte"). It resolves to a label, or to a reason it cannot be one: two
labels (a hedge), a letter this sample does not have, a letter whose text names another option.
Exact option text is tried first, so an option such as "E. coli" is never read as label E, and
options whose own texts are single letters or numbers ("a", "G", "2") are read as texts.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from mmbu.benchmark_eval.parser._text import normalise_label_text

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


@lru_cache(maxsize=None)
def option_labels(option_count: int) -> tuple[str, ...]:
    """The labels of a question with `option_count` options: ``A``, ``B``, …"""
    if not 0 < option_count <= len(LETTERS):
        raise ValueError(f"a closed question needs 1 to {len(LETTERS)} options, got {option_count}")
    return tuple(LETTERS[:option_count])


@dataclass(frozen=True)
class Resolution:
    label: str | None
    form: str  # how the label was read, or why it could not be

    @property
    def names_something(self) -> bool:
        """False when the candidate names no option at all (then it is not an answer)."""
        return self.form not in ("no_label", "empty_answer")


_EMPHASIS = re.compile(r"[*`]+|(?<!\w)_+|_+(?!\w)")
_QUOTES = "\"'“”‘’«»「」『』"
_DECORATION = re.compile(r"^(?:[:~=|>]{2,}|[✅✔☑👉➡→]+)\s*|\s*(?:[:~=|<]{2,}|[✅✔☑]+)$")  # ":: D) … ::", "✅ D"
_PREFIX = r"(?:(?i:option|choice|answer|letter|选项|選項|옵션|Option)\s*)?"
_LETTER_ONLY = re.compile(r"^" + _PREFIX + r"[(\[]?\s*([A-Za-z])\s*[)\]]?\s*[.:;,!。．]?$")
# "B. Monocyte", "B) Monocyte", "(b) monocyte", "Option D: Band neutrophil", "B - Monocyte"
_LETTER_WITH_TEXT = re.compile(
    r"^" + _PREFIX + r"(?:[(\[]\s*([A-Za-z])\s*[)\]]|([A-Z])\s*(?:[.:)]|\s[-–—])|([A-Za-z])\))\s*(.+)$", re.DOTALL
)
# "B, because …", "B; …", "B。…": a label closed by a comma, semicolon or full stop of CJK text.
_LEADING_LETTER = re.compile(r"^" + _PREFIX + r"[(\[]?([A-Z])[)\]]?(\s*[,;，；。].*)$", re.DOTALL)
# "C because …", "C since …", "B is correct", "D 24.3 kN", "C 입니다", "C です": a capital letter, then
# a connector or something that is not an English word ("A cell in the centre…" starts with an article).
_LETTER_THEN = re.compile(r"^" + _PREFIX + r"([A-Z])(?:\s+|(?=[(\[]))(.+)$", re.DOTALL)  # also "A（62°）" unspaced
_CONNECTOR = re.compile(
    r"^(?:(?:because|since|as|is|was|would|should|seems|appears|fits|matches|best|which|that|due|given|for|"
    r"ist|est|es|car|porque|weil)\b|입니다|이다|です|である|是|为|為)|^[^\sA-Za-z]"
)
# A second label joined to the first: "B or C", "(B) and (C)", "B, C", "B/C", "B 和 C". A second label before a
# lower-case word is a word ("B, a cell …"), unless that word joins a third label: "A, C and E" names three.
_WORD_LETTERS = ("A", "I")  # English words as well as labels
# "B > A > C": an ordering of the options names several of them too.
_JOINED_LABEL = re.compile(
    r"^\s*(?:[,;/&+、，和或>＞<＜→≥≫]|\b(?i:and|or|und|oder|et|ou|y|o|then)\b)\s*(?:(?i:option|choice)\s+)?[(\[]?([A-Z])"
    r"(?![A-Za-z])(?!\s+(?!(?i:and|or|und|oder|et|ou|y|o)\s+[(\[]?[A-Z](?![A-Za-z]))[a-z])"
)
_LOWER_WITH_TEXT = re.compile(r"^([a-z])\s*[.:]\s*(.+)$", re.DOTALL)
# Lower-case labels (Japanese exams label options a-e; many harnesses lower-case replies): "c: Presence of diabetic
# retinopathy" (the option translated), "b: ACTH（副腎皮質刺激ホルモン）" (a gloss), "c（糖尿病性腎症）", "cです". The letter
# must be closed by ":" / "." (not "e.g.", "i.e."), a bracket, or Japanese text, so the article "a" opens nothing.
_LOWER_JOINED = re.compile(r"^\s*(?:[,;/&+、，和或]|と|や|及び|および|または|か|\b(?:and|or)\b)\s*[(\[（]?([a-zA-Z])(?![A-Za-z])")
_LOWER_LABEL_THEN = re.compile(
    r"^([a-z])(?:\s*[:：]\s*|\.\s+(?![a-z]\.)|\s*(?=[(（])|(?=です|である|が正解|[\u3040-\u30ff\u4e00-\u9fff]))(.+)$", re.DOTALL
)
_LONE_LABEL = re.compile(r"^\s*[(\[]?([A-Z])[)\]]?\s*[.。]?\s*$")
# After an option's label and text, a verdict against it: the reply is going through the options.
_VERDICT_AGAINST = re.compile(
    r"^\W*(?:(?:is\s+|seems\s+|appears\s+|would\s+be\s+|was\s+)?"
    r"(?:incorrect|wrong|false|unlikely|less\s+likely|not\b|no\b(?!\s+doubt)|excluded|ruled\s+out)"
    r"|isn't\b|falsch|unwahrscheinlich|nicht\b|错误|不正确|不对|排除)",
    re.IGNORECASE,
)
# "A, not B", "A (not C)": a contrast that keeps the first label, not a verdict against it.
_NOT_ANOTHER = re.compile(r"^\W*(?:is\s+)?not\s+(?:(?i:option|choice)\s+)?[(\[]?[A-Z](?![A-Za-z])")
_ARTICLE = re.compile(r"^(?:a|an|the)\s+", re.IGNORECASE)
# Inside an answer field only: "I think it is C", "the nucleus (C)", "probably C".
_INNER_LABEL = re.compile(
    r"(?:\b(?:is|be|as|choose|select|pick|option|choice)\s*:?\s*[(\[]?([A-Z])[)\]]?|[(\[]([A-Z])[)\]])"
    r"(?![A-Za-z0-9])"
)
_INNER_BARE_END = re.compile(r"(?:^|\s)(?:probably|likely|most likely|definitely|clearly)\s+([A-Z])[.!]?$", re.IGNORECASE)


# End-of-answer tokens some templates make models write: "A <eoa>", "B</s>", "C<|im_end|>".
_END_TOKENS = re.compile(r"(?:\s*<\|?/?[A-Za-z_]{1,20}\|?>)+\s*$")
_QUOTED = re.compile(r"^\s*([\"'“‘])([^\"'“”‘’\n]{1,300})([\"'”’])")


@lru_cache(maxsize=1 << 12)
def clean_candidate(candidate: str) -> str:
    text = _END_TOKENS.sub("", _EMPHASIS.sub("", candidate)).strip()
    if quoted := _QUOTED.match(text):  # "answer_choice": "A"}  /  Answer: "B. Monocyte" is my choice
        text = quoted.group(2)
    return _DECORATION.sub("", text.strip(_QUOTES).strip()).strip(_QUOTES).strip()


@lru_cache(maxsize=1 << 14)
def _unique_option_texts(options: tuple[str, ...]) -> dict[str, int]:
    """Normalised option text → option index, for texts that occur once among the options."""
    normalised = [normalise_label_text(o) for o in options]
    return {n: i for i, n in enumerate(normalised) if n and normalised.count(n) == 1}


def option_by_text(text: str, options: Sequence[str]) -> str | None:
    """The label whose normalised option text equals `text` (with or without a leading article)."""
    labels = option_labels(len(options))
    by_text = _unique_option_texts(tuple(options))
    stripped = text.rstrip(".。")
    hits = {by_text.get(normalise_label_text(stripped)), by_text.get(normalise_label_text(_ARTICLE.sub("", stripped)))}
    hits.discard(None)
    return labels[hits.pop()] if len(hits) == 1 else None


def _joined_label(text: str, chosen: str, labels: Sequence[str]) -> bool:
    """Whether `text` (what follows the chosen label) starts by naming a second, different label."""
    match = _JOINED_LABEL.match(text)
    return bool(match) and match.group(1) in labels and match.group(1) != chosen


def _another_label(rest: str, chosen: str, labels: Sequence[str]) -> bool:
    """Whether `rest` is itself just another label ("(B) (C)", "B C"): two answers, not a label and its text."""
    match = _LONE_LABEL.match(rest)
    return bool(match) and match.group(1) in labels and match.group(1) != chosen


def _strip_option_text(rest: str, option_text: str) -> str:
    """`rest` without a leading copy of the chosen option's text (so its own letters are not mentions)."""
    pattern = r"\W*".join(re.escape(word) for word in normalise_label_text(option_text).split())
    match = re.match(r"\W*" + pattern + r"(?!\w)", rest, re.IGNORECASE) if pattern else None
    return rest[match.end():] if match else rest


def _with_text(letter: str, rest: str, options: Sequence[str], labels: Sequence[str]) -> Resolution:
    if letter not in labels:
        return Resolution(None, "invalid_label")
    by_text = option_by_text(rest, options)
    if by_text is not None and by_text != letter:
        return Resolution(None, "conflicting_text")
    if by_text == letter:
        return Resolution(letter, "label_with_text")
    tail = _strip_option_text(rest, options[labels.index(letter)])
    if _joined_label(tail, letter, labels) or _another_label(rest, letter, labels):
        return Resolution(None, "multiple_labels")
    if _VERDICT_AGAINST.match(tail):
        return Resolution(None, "option_review")  # "A) None of the Above: Incorrect – …"
    return Resolution(letter, "label_with_text")


def resolve_candidate(candidate: str, options: Sequence[str], *, field: bool = False) -> Resolution:
    """Read one candidate answer string as an option label of `options` (see the module docstring).

    `field` marks the value of an explicit answer field ("Answer: I think it is C"), where a label
    inside the words also counts when nothing else in the value names an option.
    """
    labels = option_labels(len(options))
    text = clean_candidate(candidate)
    if not text:
        return Resolution(None, "empty_answer")
    # A lone letter is a label even where an option's text is that letter: the prompt asks for
    # labels ("Answer: C" names label C, not the option whose text is "C").
    if match := _LETTER_ONLY.match(text):
        letter = match.group(1).upper()
        return Resolution(letter, "label") if letter in labels else Resolution(None, "invalid_label")
    if (by_text := option_by_text(text, options)) is not None:
        return Resolution(by_text, "option_text")
    if (match := _LOWER_WITH_TEXT.match(text)) and option_by_text(match.group(2), options) == match.group(1).upper():
        return Resolution(match.group(1).upper(), "label_with_text")  # "b. promyelocyte": a letter and its own text
    if match := _LETTER_WITH_TEXT.match(text):
        letter = next(g for g in match.groups()[:3] if g).upper()
        return _with_text(letter, match.group(4), options, labels)
    if match := _LOWER_LABEL_THEN.match(text):
        joined = _LOWER_JOINED.match(match.group(2))
        if joined and joined.group(1).upper() in labels and joined.group(1).upper() != match.group(1).upper():
            return Resolution(None, "multiple_labels")  # "bとc", "a, d": two answers
        return _with_text(match.group(1).upper(), match.group(2), options, labels)
    if match := _LEADING_LETTER.match(text):
        return _leading(match.group(1), match.group(2), labels)
    if match := _LETTER_THEN.match(text):
        letter, rest = match.groups()
        if letter in labels and (_joined_label(rest, letter, labels) or _another_label(rest, letter, labels)):
            return Resolution(None, "multiple_labels")  # "B or C", "B C"
        if _connected(letter, rest) or _starts_with_text(letter, rest, options, labels):
            if letter not in labels:
                return Resolution(None, "invalid_label")
            if _verdict_against(rest):
                return Resolution(None, "verdict_against")  # "A is wrong.", "A (unlikely)"
            if (named := option_by_text(rest, options)) is not None and named != letter:
                return Resolution(None, "conflicting_text")
            return Resolution(letter, "label")
    if field:
        if (topic := _option_as_topic(text, options)) is not None:
            return Resolution(topic, "option_text_as_topic")
        return _inner_label(text, labels)
    return Resolution(None, "no_label")


_TOPIC_PARTICLE = re.compile(r"^(?:は|が|の|を|、|,)")


def _option_as_topic(text: str, options: Sequence[str]) -> str | None:
    """The option an answer field's words open with as their topic ("答え: 無気肺は、…", "答え: FSHの値が…"): its exact
    text, then a Japanese particle, and no other option's text in the rest. Otherwise the field names nothing."""
    labels = option_labels(len(options))
    opening = [i for i, option in enumerate(options)
               if len(option.strip()) >= 2 and text.startswith(option.strip()) and _TOPIC_PARTICLE.match(text[len(option.strip()):])]
    if len(opening) != 1:
        return None
    chosen = opening[0]
    rest = text[len(options[chosen].strip()):]
    if any(option.strip() and option.strip() in rest for i, option in enumerate(options) if i != chosen):
        return None
    return labels[chosen]


def _connected(letter: str, rest: str) -> bool:
    """Whether `rest` continues a label rather than a sentence: "C because", "D 24.3 kN", not "A 2 cm mass"."""
    if not _CONNECTOR.match(rest):
        return False
    return not (letter in _WORD_LETTERS and rest[:1].isdigit())


def _starts_with_text(letter: str, rest: str, options: Sequence[str], labels: Sequence[str]) -> bool:
    """Whether `rest` begins with the text of option `letter` ("C Estrogen receptor Positive, as …")."""
    if letter not in labels:
        return False
    own = normalise_label_text(options[labels.index(letter)])
    return bool(own) and (normalise_label_text(rest) + " ").startswith(own + " ")


def _verdict_against(rest: str) -> bool:
    """Whether what follows a reply's opening label rejects it ("A is wrong.", "A (unlikely)", "A, incorrect")."""
    return bool(_VERDICT_AGAINST.match(rest)) and not _NOT_ANOTHER.match(rest)


def _leading(letter: str, rest: str, labels: Sequence[str]) -> Resolution:
    if letter not in labels:
        return Resolution(None, "invalid_label")
    if _joined_label(rest, letter, labels):
        return Resolution(None, "multiple_labels")
    if _verdict_against(rest):
        return Resolution(None, "verdict_against")  # "A, incorrect": the reply rejects the label it opens with
    return Resolution(letter, "label")


def _inner_label(text: str, labels: Sequence[str]) -> Resolution:
    """A field value in words: the one label it names ("I think it is C"), else nothing."""
    found = {a or b for a, b in _INNER_LABEL.findall(text)}
    if not found and (match := _INNER_BARE_END.search(text)):
        found = {match.group(1).upper()}
    if not found:
        return Resolution(None, "no_label")
    if len(found) > 1:
        return Resolution(None, "multiple_labels")
    letter = found.pop()
    return Resolution(letter, "label_in_words") if letter in labels else Resolution(None, "invalid_label")


def bare_answer(candidate: str, options: Sequence[str]) -> bool:
    """Whether `candidate` is only an answer: a label, an option's text, or a label with its own text
    ("C) clipping vas deferens"), with nothing after it (no "— because …", no "→ …")."""
    resolution = resolve_candidate(candidate, options)
    if resolution.label is None:
        return False
    if resolution.form in ("label", "option_text"):
        return _LETTER_ONLY.match(clean_candidate(candidate)) is not None or resolution.form == "option_text"
    match = _LETTER_WITH_TEXT.match(clean_candidate(candidate))
    if not match:
        return False
    labels = option_labels(len(options))
    tail = _strip_option_text(match.group(4), options[labels.index(resolution.label)])
    return not re.sub(r"[\W_]+", "", tail)
