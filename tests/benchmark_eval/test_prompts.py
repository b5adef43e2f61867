"""Prompts for the 4 tasks x 2 forms x 3 templates, and the ROI drawn on the image (pixel level)."""
from __future__ import annotations

import io
import re

import numpy as np
import pytest
from PIL import Image

from mmbu.benchmark_eval.models import ModelEntry, default_registry, from_model_convention, to_model_convention
from mmbu.benchmark_eval.tasks import (FORMS, PROMPT_VERSION, ROI_COLOUR, TASK_SPECS, TEMPLATES, ImageTooLarge,
                                       PromptError, build_prompt, plan_frames, prepare_image)
from support.eval_release import make_rows, object_image, png

QWEN25 = default_registry().get("Qwen/Qwen2.5-VL-7B-Instruct")
QWEN3 = default_registry().get("Qwen/Qwen3-VL-8B-Instruct")
LLAVA = default_registry().get("LLaVA-v1.5-7B")


def decoded(data: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))


@pytest.mark.parametrize("task", list(TASK_SPECS))
@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("template", TEMPLATES)
def test_every_configuration_has_a_prompt_with_its_question_and_answer_format(task, form, template):
    row = make_rows(task, 1, (320, 240), 3)[0]
    frames = plan_frames((320, 240), QWEN3)
    prompt = build_prompt(task, form, template, row, box_format=QWEN3.box_format, frames=frames)
    assert row[f"question_{template}"] in prompt.text
    if form == "closed":
        assert prompt.letters == ("A", "B", "C", "D", "E")
        assert "E. None of the above" in prompt.text
        assert prompt.text.endswith('Answer with the letter of the correct option only (A, B, C, D or E), in the form "Answer: X".')
    elif TASK_SPECS[task].detection:
        assert "normalised to the range 0 to 1000" in prompt.text and 'Answer: [[x1, y1, x2, y2], ...]' in prompt.text
    else:
        assert "short phrase" in prompt.text and not re.search(r"^A\. ", prompt.text, re.M)
    if TASK_SPECS[task].roi != "none":
        assert "green" in prompt.text


def test_closed_options_keep_the_release_order():
    row = make_rows("ungrounded_classification", 1, (320, 240), 1)[0]
    prompt = build_prompt("ungrounded_classification", "closed", "modality", row, box_format=QWEN3.box_format,
                          frames=plan_frames((320, 240), QWEN3))
    assert list(prompt.shown_options) == row["options"]
    assert [f"{k}. {t}" for k, t in zip(prompt.letters, row["options"])] == re.findall(r"^[A-E]\. .+$", prompt.text, re.M)


def test_pixel_convention_states_the_size_of_the_image_as_sent():
    row = make_rows("object_detection", 1, (320, 240), 1)[0]
    frames = plan_frames((320, 240), QWEN25)
    prompt = build_prompt("object_detection", "open", "no_context", row, box_format=QWEN25.box_format, frames=frames)
    assert frames.sent_size == (308, 252)
    assert "pixel coordinates of this image, which is 308 pixels wide and 252 pixels high" in prompt.text


def test_detection_closed_candidates_are_written_in_the_models_convention():
    row = make_rows("object_detection", 1, (320, 240), 2)[0]
    frames = plan_frames((320, 240), QWEN3)
    prompt = build_prompt("object_detection", "closed", "full_context", row, box_format=QWEN3.box_format, frames=frames)
    gold_letter = prompt.letters[row["options"].index(row["answer"])]
    shown = dict(zip(prompt.letters, prompt.shown_options))
    values = [float(v) for v in re.findall(r"\d+", shown[gold_letter])]
    back = from_model_convention(values, QWEN3.box_format, frames.image_size, frames.content_size, frames.sent_size)
    gold = [float(v) for v in re.findall(r"\d+", row["answer"])]
    assert back == pytest.approx(gold, abs=0.5)
    assert shown["E"] == "None of the above"


def test_closed_detection_asks_the_releases_closed_question_for_one_instance():
    """The open question asks for every instance; the closed options hold one (the release's closed_question_*)."""
    row = {**make_rows("object_detection", 1, (320, 240), 2)[0],
           "question_full_context": "Locate every cell nucleus in this fluorescence microscopy image.",
           "closed_question_full_context": "Which box contains a cell nucleus in this fluorescence microscopy image?"}
    frames = plan_frames((320, 240), QWEN3)
    closed = build_prompt("object_detection", "closed", "full_context", row, box_format=QWEN3.box_format, frames=frames)
    assert closed.text.startswith("Which box contains a cell nucleus in this fluorescence microscopy image?")
    assert "Locate every" not in closed.text and "normalised to the range 0 to 1000" in closed.text
    opened = build_prompt("object_detection", "open", "full_context", row, box_format=QWEN3.box_format, frames=frames)
    assert opened.text.startswith("Locate every cell nucleus") and "Which box" not in opened.text


def test_empty_question_or_options_is_a_prompt_error():
    row = make_rows("ungrounded_classification", 1, (320, 240), 1)[0]
    frames = plan_frames((320, 240), QWEN3)
    with pytest.raises(PromptError, match="column 'question_modality' is empty"):
        build_prompt("ungrounded_classification", "open", "modality", {**row, "question_modality": "  "},
                     box_format=QWEN3.box_format, frames=frames)
    with pytest.raises(PromptError, match="column 'options' is empty"):
        build_prompt("ungrounded_classification", "closed", "modality", {**row, "options": []},
                     box_format=QWEN3.box_format, frames=frames)


def test_prompt_version_is_a_named_constant():
    assert re.fullmatch(r"mmbu-eval-prompt-v\d+", PROMPT_VERSION)


def test_box_roi_is_a_green_outline_just_outside_the_box():
    box = (60, 40, 160, 120)
    original = object_image((320, 240), box, seed=5)
    prepared = prepare_image(png(original), QWEN3, boxes=[list(box)])
    pixels = decoded(prepared.data)
    assert prepared.frames.sent_size == (320, 240)
    green = np.all(pixels == ROI_COLOUR, axis=-1)
    # the 3-pixel ring around the box is green, the box itself is untouched
    assert green[37:40, 57:163].all() and green[120:123, 57:163].all()
    assert green[37:123, 57:60].all() and green[37:123, 160:163].all()
    assert not green[40:120, 60:160].any()
    assert np.array_equal(pixels[40:120, 60:160], np.asarray(original)[40:120, 60:160])
    assert green.sum() == (106 * 86) - (100 * 80)


def test_mask_roi_is_a_green_ring_around_the_region():
    from support.eval_release import mask_image

    box = (100, 60, 200, 180)
    original = object_image((320, 240), box, seed=6)
    mask = mask_image((320, 240), box)
    prepared = prepare_image(png(original), QWEN3, mask_png=png(mask))
    pixels = decoded(prepared.data)
    green = np.all(pixels == ROI_COLOUR, axis=-1)
    inside = np.asarray(mask) > 0
    assert not (green & inside).any()
    ring_y, ring_x = np.nonzero(green)
    assert ring_x.min() == 97 and ring_x.max() == 202 and ring_y.min() == 57 and ring_y.max() == 182
    assert np.array_equal(pixels[inside], np.asarray(original)[inside])


def test_images_are_resized_to_the_registry_limits():
    big = png(object_image((2400, 1600), (100, 100, 400, 300), seed=1))
    qwen = prepare_image(big, QWEN25)
    w, h = qwen.frames.sent_size
    assert w % 28 == 0 and h % 28 == 0 and w * h <= 1003520
    assert Image.open(io.BytesIO(qwen.data)).size == (w, h)
    llava = prepare_image(big, LLAVA)
    assert llava.frames.content_size == (672, 448) and llava.frames.sent_size == (672, 672)
    assert llava.frames.content_offset == (0, 112)   # centred, as LLaVA-1.5 was trained (expand2square)
    canvas = decoded(llava.data)
    assert (canvas[:112] == (122, 116, 104)).all() and (canvas[560:] == (122, 116, 104)).all()  # the CLIP mean
    assert qwen.data_url.startswith("data:image/png;base64,")


@pytest.mark.parametrize("name", ["LLaVA-v1.5-7B", "LLaVA-Med-7B", "MedGemma-1.5-4B"])
def test_a_box_drawn_on_the_padded_square_maps_back_exactly(name):
    """The object's pixels on the sent canvas, read in the model's own convention, land on the gold box."""
    entry = default_registry().get(name)
    gold = (150, 90, 450, 330)
    prepared = prepare_image(png(object_image((600, 400), gold, seed=3)), entry)
    frames = prepared.frames
    canvas = decoded(prepared.data)
    fill = np.array(entry.image.square_pad.fill)
    ys, xs = np.nonzero(np.any(canvas != fill, axis=-1))  # the image itself, inside its padding
    ox, oy = frames.content_offset
    assert (xs.min(), ys.min()) == (ox, oy) and (xs.max() + 1, ys.max() + 1) == (ox + frames.content_size[0], oy + frames.content_size[1])
    model_box = to_model_convention(gold, entry.box_format, frames.image_size, frames.content_size, frames.sent_size,
                                    frames.content_offset)
    back = from_model_convention(model_box, entry.box_format, frames.image_size, frames.content_size, frames.sent_size,
                                 frames.content_offset)
    assert back == pytest.approx(gold, abs=1.0)  # the model's convention is rounded (0-1000 or 3 decimals)


def test_qwen_aspect_ratio_is_checked_after_resizing_too():
    """8000x40 passes smart_resize at 200:1 but becomes 8008x28 (286:1), which the server refuses."""
    with pytest.raises(ImageTooLarge, match="after resizing"):
        plan_frames((8000, 40), QWEN25)
    assert plan_frames((8000, 80), QWEN25).content_size[1] == 84  # 100:1 stays within the limit


def test_images_that_cannot_be_fitted_are_too_large():
    sliver = png(Image.new("RGB", (3000, 10), (200, 200, 200)))
    with pytest.raises(ImageTooLarge, match="aspect ratio"):
        prepare_image(sliver, QWEN25)


def test_byte_cap_falls_back_to_jpeg_then_gives_up():
    noisy = png(Image.fromarray(np.random.default_rng(0).integers(0, 255, (512, 512, 3), dtype=np.uint8)))
    capped = ModelEntry(**{**QWEN3.model_dump(), "name": "capped", "display_name": "capped", "hf_id": "x/capped",
                           "aliases": (), "image": {"max_bytes": 400_000}})
    prepared = prepare_image(noisy, capped)
    assert prepared.mime == "image/jpeg" and len(prepared.data) <= 400_000
    tiny = ModelEntry(**{**capped.model_dump(), "image": {"max_bytes": 1000}})
    with pytest.raises(ImageTooLarge, match="limit is 1000"):
        prepare_image(noisy, tiny)
