"""The versioned prompt formatter: one release row + task/form/template + model -> the prompt text.

Our own wording (not the authors'). Every record carries :data:`PROMPT_VERSION` and it is part of
the request hash, so changing any wording, the option layout or the ROI drawing (see
:mod:`.images`) must bump it — resumed runs then re-ask instead of mixing prompt versions.

Shapes (closed options are lettered A, B, C, ... in the release's presentation order):

* closed: ``<ROI sentence>`` ``<template question>`` / ``Options:`` / ``A. text`` ... /
  'Answer with the letter of the correct option only, in the form "Answer: X".'
* open: ``<ROI sentence>`` ``<template question>`` / 'Answer with a short phrase ... "Answer: <phrase>".'
* detection open: the question, then a box for every instance asked in the convention stated
  explicitly (pixel coordinates of the image as sent with its size, or 0–1000, or 0–1; corner
  order) and the answer form. The release question names no coordinate frame: the model's does.
* detection closed: the release's closed-form question (``closed_question_<template>``: which box holds one instance
  of the target), the convention, then the candidate boxes as options in the model's own convention. A release
  without that column gets the template question and 'Which box contains the "<target>"?'.
"""
from __future__ import annotations

import re
import string
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mmbu.benchmark_eval.models.box_format import BoxFormat, describe_convention, model_frame_size, to_model_convention
from mmbu.benchmark_eval.tasks.images import ROI_COLOUR_NAME, Frames
from mmbu.benchmark_eval.tasks.spec import TASK_SPECS
from mmbu.core.release import CLOSED_QUESTION_COLUMNS, QUESTION_COLUMNS, Form

# In every prediction record and its key (a rerun skips the records of this version): bump it whenever what a model
# is shown changes (a prompt's text, or how tasks/images.py draws and sizes the image), so that no answer given to one
# prompt is kept as an answer to another.
PROMPT_VERSION = "mmbu-eval-prompt-v4"
SYSTEM_PROMPT = "You are a careful assistant who answers questions about biomedical images from what is visible in them."
ROI_SENTENCES = {
    "box": f"The region of interest is marked by the {ROI_COLOUR_NAME} box drawn on the image.",
    "mask": f"The region of interest is the area outlined in {ROI_COLOUR_NAME} on the image.",
}
_BOX_TEXT = re.compile(r"^\s*\[\s*(-?\d+(?:\.\d+)?)\s*,\s*(-?\d+(?:\.\d+)?)\s*,\s*(-?\d+(?:\.\d+)?)\s*,\s*(-?\d+(?:\.\d+)?)\s*\]\s*$")


class PromptError(Exception):
    """The release row cannot be turned into this prompt; the message names the field."""


@dataclass(frozen=True)
class Prompt:
    system: str
    text: str
    letters: tuple[str, ...] = ()          # option letters shown (closed form)
    shown_options: tuple[str, ...] = ()    # option texts as shown to the model (boxes in its convention)


def _text(row: Mapping[str, Any], column: str) -> str:
    value = row.get(column)
    if value is None or (isinstance(value, float) and value != value) or not str(value).strip():
        raise PromptError(f"sample '{row.get('sample_id')}': column '{column}' is empty")
    return str(value).strip()


def _format_number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def format_box(values: list[float]) -> str:
    return "[" + ", ".join(_format_number(v) for v in values) + "]"


def _options(row: Mapping[str, Any]) -> list[str]:
    options = row.get("options")
    if options is None or len(options) == 0:
        raise PromptError(f"sample '{row.get('sample_id')}': column 'options' is empty; the closed form needs options")
    if len(options) > 26:
        raise PromptError(f"sample '{row.get('sample_id')}': {len(options)} options; at most 26 can be lettered")
    return [str(o) for o in options]


def detection_option_text(option: str, box_format: BoxFormat, frames: Frames) -> str:
    """A candidate box (original pixels) rewritten in the model's convention; other texts unchanged."""
    match = _BOX_TEXT.match(option)
    if not match:
        return option
    box = tuple(float(v) for v in match.groups())
    return format_box(to_model_convention(box, box_format, frames.image_size, frames.content_size, frames.sent_size,
                                          frames.content_offset))


def build_prompt(task: str, form: str, template: str, row: Mapping[str, Any], *, box_format: BoxFormat,
                 frames: Frames) -> Prompt:
    """The prompt for one configuration of one release row (raises :class:`PromptError`)."""
    spec = TASK_SPECS[task]
    question = _text(row, QUESTION_COLUMNS[template])
    lead = ROI_SENTENCES.get(spec.roi)
    parts = [f"{lead} {question}" if lead else question]
    letters: tuple[str, ...] = ()
    shown: tuple[str, ...] = ()
    if spec.detection:
        target = _text(row, "target")
        frame = model_frame_size(box_format, frames.sent_size)
        convention = describe_convention(box_format, frame)
        corners = "[y1, x1, y2, x2]" if box_format.order == "yxyx" else "[x1, y1, x2, y2]"
        if form == Form.OPEN:
            # every instance: detection is scored by greedy IoU matching against all gold boxes
            parts.append(f'Give a bounding box for every "{target}" you can see. {convention}')
            parts.append(f'Answer in the form "Answer: [{corners}, ...]", one box per "{target}".')
        else:
            options = [detection_option_text(o, box_format, frames) for o in _options(row)]
            letters, shown = tuple(string.ascii_uppercase[: len(options)]), tuple(options)
            closed = row.get(CLOSED_QUESTION_COLUMNS[template])
            if isinstance(closed, str) and closed.strip():
                parts = [closed.strip(), convention]
            else:  # a release from before the closed-form questions
                parts.append(f'Which box contains the "{target}"? {convention}')
            parts.append("Options:\n" + "\n".join(f"{k}. {t}" for k, t in zip(letters, shown)))
            parts.append(_closed_instruction(letters))
    elif form == Form.CLOSED:
        options = _options(row)
        letters, shown = tuple(string.ascii_uppercase[: len(options)]), tuple(options)
        parts.append("Options:\n" + "\n".join(f"{k}. {t}" for k, t in zip(letters, shown)))
        parts.append(_closed_instruction(letters))
    else:
        parts.append('Answer with a short phrase (a few words) naming it, in the form "Answer: <short phrase>".')
    return Prompt(SYSTEM_PROMPT, "\n\n".join(parts), letters, shown)


def _closed_instruction(letters: tuple[str, ...]) -> str:
    allowed = ", ".join(letters[:-1]) + f" or {letters[-1]}" if len(letters) > 1 else letters[0]
    return f'Answer with the letter of the correct option only ({allowed}), in the form "Answer: X".'
