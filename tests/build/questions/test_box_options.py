"""Closed detection options with one right answer, placed on the image's content (synthetic images, Pillow-written)."""
from __future__ import annotations

import numpy as np
import pytest
from PIL import Image
from support import content_images
from support.build_manifests import make_manifest, write_taxonomy
from support.question_rows import placed_item

from mmbu.build.questions import instantiate_questions, rows_frame
from mmbu.build.questions.box_options import MAX_INSTANCE_SHARE, box_option_problems
from mmbu.build.questions.content import content_mask, read_content_mask

NOTA = "None of the above"


def truth_at_working_size(truth: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    return np.asarray(Image.fromarray(truth).resize(shape[::-1], Image.Resampling.NEAREST))


@pytest.mark.parametrize("make", [content_images.fundus, content_images.endoscopy, content_images.ct_slice,
                                  content_images.tissue_field, lambda: content_images.fluorescence_field()[:2],
                                  lambda: content_images.fluorescence_field(nuclei=3)[:2]],
                         ids=["fundus disc on black", "endoscopy with a black border and text", "CT body in air",
                              "stained tissue field", "dark-field fluorescence", "a few cells on a dark field"])
def test_the_content_mask_covers_the_picture_and_little_else(make):
    image, truth = make()
    mask = content_mask(image)
    truth = truth_at_working_size(truth, mask.mask.shape)
    assert (mask.mask & truth).sum() >= 0.99 * truth.sum()  # the picture is content
    assert (mask.mask & ~truth).mean() <= 0.05  # the frame, air and text are not, give or take its rim


def test_flat_and_tiny_images_are_all_content():
    for image in (Image.new("L", (64, 48), 0), Image.new("RGB", (64, 48), (255, 255, 255)), Image.new("L", (3, 2), 9)):
        assert content_mask(image).share == 1.0


def detection_rows(image_path, gold, others=(), rows=20):
    with Image.open(image_path) as image:
        size = image.size
    return [placed_item("demo_marrow", "nucleus", sample_id=f"demo_marrow-{k:016x}", task="object_detection",
                        source_path=f"img{k}.png", image=image_path, size=size, boxes=gold, other_boxes=others,
                        modality="fluorescence microscopy", sub_modality="epifluorescence microscopy",
                        specimen="cell culture") for k in range(rows)]


def ask(rows, manifest, taxonomy, seed):
    questions, dropped = instantiate_questions(rows, manifest, taxonomy, seed)
    return rows_frame(questions), dropped


@pytest.fixture
def manifest():
    return make_manifest({"kind": "coco", "annotations": "a.json"}, tasks=["object_detection"],
                         labels={"nucleus": "cell nucleus"}, questions={"options_name": "cellular structure"})


def test_in_a_crowded_field_one_option_holds_a_nucleus_and_the_others_none(tmp_path, manifest):
    """A wrong box made by shifting the answer until IoU < 0.5 still holds most of a nucleus: none may."""
    image, _, nuclei = content_images.fluorescence_field()
    image.save(tmp_path / "field.png")
    taxonomy = write_taxonomy(tmp_path)
    questions, dropped = ask(detection_rows(tmp_path / "field.png", nuclei), manifest, taxonomy, 5)
    assert dropped == [] and len(questions) == 20
    mask = read_content_mask(tmp_path / "field.png")
    for row in questions.itertuples():
        assert box_option_problems(list(row.options), row.answer, nuclei, (512, 512), mask) == []
        assert row.question_no_context == "Locate every cell nucleus in this image."
        assert row.closed_question_no_context == "Which box contains a cell nucleus in this image?"
        answer = [int(v) for v in row.answer.strip("[]").split(",")]
        assert answer in nuclei and len(row.options) == 5 and NOTA in row.options
    again, _ = ask(detection_rows(tmp_path / "field.png", nuclei)[::-1], manifest, taxonomy, 5)
    assert dict(zip(again.sample_id, again.options.map(list))) == dict(zip(questions.sample_id, questions.options.map(list)))
    other_seed, _ = ask(detection_rows(tmp_path / "field.png", nuclei), manifest, taxonomy, 6)
    assert other_seed.options.map(list).tolist() != questions.options.map(list).tolist()


@pytest.mark.parametrize("make, lesion", [(content_images.ct_slice, (300, 250, 330, 280)),
                                          (content_images.endoscopy, (300, 200, 340, 240)),
                                          (content_images.fundus, (150, 300, 190, 340))],
                         ids=["CT: not in the air", "endoscopy: not on the frame", "fundus: not on the black"])
def test_wrong_boxes_lie_on_the_body_not_around_it(tmp_path, manifest, make, lesion):
    image, truth = make()
    image.save(tmp_path / "image.png")
    questions, dropped = ask(detection_rows(tmp_path / "image.png", [lesion]), manifest,
                                               write_taxonomy(tmp_path), 1)
    assert dropped == []
    for options in questions.options:
        for option in options:
            if option.startswith("[") and option != str(list(lesion)):
                x1, y1, x2, y2 = (int(v) for v in option.strip("[]").split(","))
                assert truth[y1:y2, x1:x2].mean() >= 0.9, option


def test_the_checker_finds_what_the_old_shifted_boxes_did(tmp_path):
    image, _, nuclei = content_images.fluorescence_field()
    mask = content_mask(image)
    answer = nuclei[0]
    half = (answer[2] - answer[0]) // 2
    shifted = [answer[0] + half, answer[1], answer[2] + half, answer[3]]  # IoU 1/3 with the answer
    text = [f"[{', '.join(map(str, b))}]" for b in (answer, shifted)]
    problems = box_option_problems(text, text[0], nuclei, image.size, mask)
    assert any("holds the instance" in p for p in problems) and any("overlap" in p for p in problems)


def test_a_target_too_crowded_for_wrong_boxes_is_an_exclusion(tmp_path, manifest):
    image, _, _ = content_images.fluorescence_field(size=128, nuclei=0)
    image.save(tmp_path / "small.png")
    gold = [[x, y, x + 24, y + 24] for x in range(0, 128, 25) for y in range(0, 128, 25)]  # nuclei everywhere
    questions, dropped = ask(detection_rows(tmp_path / "small.png", gold, rows=1), manifest,
                                               write_taxonomy(tmp_path), 1)
    assert questions.empty and "no room on the image's content" in dropped[0].reason
    assert 0 < MAX_INSTANCE_SHARE < 0.5
