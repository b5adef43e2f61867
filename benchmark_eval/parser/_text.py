"""Text clean-up shared by the closed-answer parser and the box extractor.

Reasoning models wrap their thinking in markers that differ per family (``<think>…</think>``,
MedGemma's ``<unused94>thought…<unused95>``); the registry declares them per model. Chat models
wrap JSON in Markdown code fences and letters in LaTeX or Markdown; some answer in full-width
characters or with zero-width spaces. None of that is the answer itself.
"""
from __future__ import annotations

import bisect
import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache

THINK = ("<think>", "</think>")


@dataclass(frozen=True)
class ReasoningMarkers:
    """The reasoning blocks a model writes, stripped before any parsing.

    ``pairs`` are (open, close) markers. ``prefilled`` means the chat template already opened the
    block in the prompt (Qwen3-VL-Thinking, DeepSeek-R1): the reply is reasoning until the first
    close marker, so a reply without one never reached an answer.
    """

    pairs: tuple[tuple[str, str], ...] = (THINK,)
    prefilled: bool = False


DEFAULT_REASONING = ReasoningMarkers()
_FENCE = re.compile(r"```[ \t]*[A-Za-z0-9_+-]*[ \t]*\n?(.*?)```", re.DOTALL)
# a word with the sign that closes it ("her2-", not the hyphen of "her2-neu"), or a lone "+"
_LABEL_WORD = re.compile(r"[^\W_]+(?:[+\-](?![^\W_]))?|\+")
_ZERO_WIDTH = re.compile("[\u200b\u200c\u200d\u2060\ufeff]")


@lru_cache(maxsize=64)
def _marker_patterns(markers: ReasoningMarkers) -> tuple[tuple[re.Pattern[str], re.Pattern[str], re.Pattern[str]], ...]:
    found = []
    for open_tag, close_tag in markers.pairs:
        o, c = re.escape(open_tag), re.escape(close_tag)
        found.append((re.compile(o + ".*?" + c, re.DOTALL | re.IGNORECASE), re.compile(c, re.IGNORECASE),
                      re.compile(o, re.IGNORECASE)))
    return tuple(found)


@lru_cache(maxsize=64)
def _first_characters(markers: ReasoningMarkers) -> frozenset[str]:
    return frozenset(tag[0] for pair in markers.pairs for tag in pair if tag)


def strip_reasoning(text: str, markers: ReasoningMarkers = DEFAULT_REASONING, *, unwrap_fences: bool = True) -> str:
    """Drop reasoning blocks and unwrap code fences (their content is kept: JSON answers live there).

    For each marker pair: whole blocks go; a lone close marker (a server that strips the opening
    one, or a prefilled template) keeps only what follows it; an opening marker that never closes
    means the model never reached an answer, so everything from it on is dropped. With
    ``prefilled`` markers and no close marker at all the whole reply is unfinished reasoning.
    Unicode is NFKC-normalised, which maps full-width ``Ｂ`` to ``B``. Linear in the reply's length,
    however many markers it repeats.
    """
    text = text if isinstance(text, str) else ""
    if not text.isascii():
        text = _ZERO_WIDTH.sub("", unicodedata.normalize("NFKC", text))
    patterns = _marker_patterns(markers)
    if markers.prefilled and not any(close.search(text) for _, close, _ in patterns):
        return ""
    if any(first in text for first in _first_characters(markers)):  # most replies hold no marker at all
        for _, close, opening in patterns:
            text = _without_blocks(text, opening, close)
            closes = list(close.finditer(text))
            if closes:
                text = text[closes[-1].end():]
            opened = opening.search(text)
            if opened:
                text = text[: opened.start()]
    if unwrap_fences and "```" in text:
        text = unwrap_code_fences(text)
    return text.strip()


def _without_blocks(text: str, opening: re.Pattern[str], close: re.Pattern[str]) -> str:
    """`text` with each opening marker, and what follows it up to the first close marker, replaced by a space."""
    parts, position = [], 0
    for open_start, _, _, close_end in tag_pairs(text, opening, close):
        parts += [text[position:open_start], " "]
        position = close_end
    return "".join(parts) + text[position:] if parts else text


def tag_pairs(text: str, opening: re.Pattern[str], close: re.Pattern[str]) -> list[tuple[int, int, int, int]]:
    """(open start, open end, close start, close end) of each block, left to right, as ``open.*?close`` finds them.

    In one pass over the marker positions: the regex tries every opening marker against the rest of the
    text, which is quadratic when a reply repeats a marker that never closes.
    """
    closes = [(m.start(), m.end()) for m in close.finditer(text)]
    if not closes:
        return []
    starts = [start for start, _ in closes]
    pairs, position = [], 0
    for match in opening.finditer(text):
        if match.start() < position:
            continue
        after = bisect.bisect_left(starts, match.end())
        if after == len(closes):
            break  # no close marker after this one, nor after any later one
        pairs.append((match.start(), match.end(), *closes[after]))
        position = closes[after][1]
    return pairs


def unwrap_code_fences(text: str) -> str:
    """Markdown code fences replaced by their content (JSON answers live there)."""
    return _FENCE.sub(lambda m: "\n" + m.group(1) + "\n", text)


def code_blocks(text: str) -> list[tuple[int, int]]:
    """(start, end) of each fenced code block in `text`."""
    return [(m.start(), m.end()) for m in _FENCE.finditer(text)]


# --- markup around answers ------------------------------------------------------------------

# \text{C}, \textbf{(C)}, \mathrm{C}: the command goes, its argument stays (applied until stable).
_TEX_COMMAND = re.compile(r"\\(?:text(?:bf|it|tt|rm|sf)?|math(?:rm|bf|it|tt|sf|bb)?|operatorname|mbox|emph)\s*\{([^{}]*)\}")
_TEX_DELIMITER = re.compile(r"\\[()\[\]]|\${1,2}")
_TEX_SPACE = re.compile(r"\\(?:quad|qquad|[ ,;:!])")
# Markdown emphasis: **C**, __C__, *C*, `C`; a "* " bullet at the start of a line stays.
_STRONG = re.compile(r"\*\*|__|`")
_SINGLE_STAR = re.compile(r"(?<![\w*])\*(?=\S)([^*\n]{1,80}?)(?<=\S)\*(?![\w*])")
_BOX_TOKENS = re.compile(r"<\|begin_of_box\|>(.*?)<\|end_of_box\|>", re.DOTALL)  # GLM-4.xV answer box
_BOXED = re.compile(r"\\(?:boxed|fbox)\s*\{((?:[^{}]|\{(?:[^{}]|\{[^{}]*\})*\})*)\}")


def plain_markup(text: str) -> str:
    """`text` with LaTeX and Markdown wrappers removed around what they wrap.

    ``\\boxed{…}`` and GLM's box tokens become ``<answer>…</answer>`` (they mark a final answer);
    ``\\text{}``-like commands, math delimiters and emphasis markers go, their content stays; math
    is written plainly (:func:`plain_math`).
    """
    if "<|" in text:
        text = _BOX_TOKENS.sub(r"<answer>\1</answer>", text)
    if "\\" in text:  # LaTeX
        text = _BOXED.sub(r"<answer>\1</answer>", text)
    text = plain_math(text)
    if "*" in text or "_" in text or "`" in text:
        text = _SINGLE_STAR.sub(r"\1", _STRONG.sub("", text))
    return text


# Math written in LaTeX and written plainly are the same answer: `$30^{\circ}$` is 30°, `\frac{4}{3}` is 4/3.
_SQRT = (re.compile(r"\\sqrt\s*\{\s*([^{}]*?)\s*\}|√\s*\{\s*([^{}]*?)\s*\}"), r"√\1\2")
_FRAC = (re.compile(r"\\[dt]?frac\s*\{\s*([^{}]*?)\s*\}\s*\{\s*([^{}]*?)\s*\}"), r"\1/\2")
_MATH = tuple((re.compile(pattern), replacement) for pattern, replacement in (
    (r"\\(?:left|right)\b", ""),
    (r"\^\s*\{?\s*\\circ\s*\}?|\\circ\b|\\degree\b", "°"),
    (r"\\sqrt\s*(?=\w)", "√"),
    (r"\\pi\b", "π"), (r"\\times\b", "×"), (r"\\cdot\b", "·"), (r"\\%", "%"),
))
_MATH_TRIGGERS = ("\\", "√", "$")
_MAX_NESTING = 8  # a bound, so a reply of a million nested braces costs a few passes, not a million


def plain_math(text: str) -> str:
    """LaTeX commands unwrapped (``\\mathrm{kg}`` → kg), math delimiters dropped and math written plainly:
    ``^{\\circ}`` → °, ``\\frac{a}{b}`` → a/b, ``\\sqrt{3}`` and ``√{3}`` → √3, ``\\pi`` → π, ``\\times`` → ×."""
    if not any(trigger in text for trigger in _MATH_TRIGGERS):
        return text
    if "\\" in text or "√" in text:
        for _ in range(_MAX_NESTING):  # innermost first: \frac{\sqrt{3}}{3}
            previous = text
            text = _FRAC[0].sub(_FRAC[1], _SQRT[0].sub(_SQRT[1], _TEX_COMMAND.sub(r"\1", text)))
            if text == previous:
                break
        for pattern, replacement in _MATH:
            text = pattern.sub(replacement, text)
        text = _TEX_SPACE.sub(" ", text)
    return _TEX_DELIMITER.sub(" ", text)


@lru_cache(maxsize=1 << 16)  # option texts and gold labels repeat across thousands of records
def normalise_label_text(text: str) -> str:
    """Casefolded NFKC text as its words (letters and digits) joined by single spaces; punctuation and whitespace
    only separate them, except the signs that carry meaning in biomedical labels: a ``+`` or ``-`` closing a word
    stays on it ("ER+", "HER2-", "CD4+": receptor status, Gram stain, markers) and a ``+`` between words stays a
    word ("T1+C"), so "HER2-" is never the same text as "HER2+" ("non-tumor" is still "non tumor").

    Two answers are "the same text" when their normalised forms are equal; this is the
    deterministic part of label matching (no stemming, no synonyms).
    """
    text = plain_math(unicodedata.normalize("NFKC", str(text))).casefold().replace("\u2212", "-")  # the minus sign
    return " ".join(_LABEL_WORD.findall(text.replace("√", " sqrt ")))  # √3 is not 3
