"""Box extraction and conversion into the original image's pixels by the declared convention."""
import pytest

from mmbu.benchmark_eval.models.box_format import BoxFormat, SmartResize
from mmbu.benchmark_eval.parser import ReasoningMarkers, extract_boxes, parse_box_string, to_original_pixels


@pytest.mark.parametrize(
    ("output", "boxes", "path"),
    [
        ('```json\n[{"bbox_2d": [10, 20, 110, 220], "label": "nucleus"}]\n```', [(10, 20, 110, 220)], "json"),
        ('{"bbox": [1.5, 2, 3, 4.25]}', [(1.5, 2, 3, 4.25)], "json"),
        ('{"box_2d": [[100, 200, 300, 400], [5, 6, 7, 8]]}', [(100, 200, 300, 400), (5, 6, 7, 8)], "json"),
        ('{"objects": [{"bbox_2d": [1, 2, 3, 4]}, {"bbox_2d": [5, 6, 7, 8]}]}', [(1, 2, 3, 4), (5, 6, 7, 8)], "json"),
        ("<|object_ref_start|>cell<|object_ref_end|><|box_start|>(12,34),(560,780)<|box_end|>",
         [(12, 34, 560, 780)], "qwen_box_tokens"),
        ("<ref>cell</ref><box>[[100, 200, 300, 400]]</box>", [(100, 200, 300, 400)], "internvl_box"),
        ("<ref>cells</ref><box>[[1, 2, 3, 4], [5, 6, 7, 8]]</box>", [(1, 2, 3, 4), (5, 6, 7, 8)], "internvl_box"),
        ("cell(12,34),(560,780)", [(12, 34, 560, 780)], "point_pair"),
        ("The lesion is at [10, 20, 30, 40] and [50,60,70,80].", [(10, 20, 30, 40), (50, 60, 70, 80)],
         "bracketed_list"),
        ("<think>maybe [0, 0, 1, 1]</think>It is at [5, 5, 9, 9]", [(5, 5, 9, 9)], "bracketed_list"),
    ],
)
def test_extracts_boxes(output, boxes, path):
    extraction = extract_boxes(output)
    assert extraction.path == path
    assert list(extraction.boxes) == [tuple(float(v) for v in b) for b in boxes]


@pytest.mark.parametrize("output", ["", None, "no box here", "[1, 2, 3]", '{"bbox_2d": [1, 2, "x", 4]}'])
def test_no_box(output):
    extraction = extract_boxes(output)
    assert not extraction.found and extraction.path == "none"


def test_gold_box_string():
    assert parse_box_string("[10, 20.5, 30, 40]") == (10.0, 20.5, 30.0, 40.0)
    assert parse_box_string("not a box") is None


def test_pixel_boxes_of_a_shrunk_image_scale_back_to_the_original():
    fmt = BoxFormat(scale="pixel")
    # the runner sent a 500x250 copy of a 1000x500 image
    assert to_original_pixels((50, 25, 100, 50), fmt, (1000, 500), (500, 250)) == (100, 50, 200, 100)
    # nothing sent smaller: pixel boxes are already original pixels
    assert to_original_pixels((50, 25, 100, 50), fmt, (1000, 500)) == (50, 25, 100, 50)


def test_normalised_scales_and_y_first_order():
    size = (640, 480)
    assert to_original_pixels((250, 500, 750, 1000), BoxFormat(scale="norm1000"), size) == (160, 240, 480, 480)
    assert to_original_pixels((0.25, 0.5, 0.75, 1.0), BoxFormat(scale="norm1"), size) == (160, 240, 480, 480)
    # Gemini: [ymin, xmin, ymax, xmax] in 0-1000
    gemini = BoxFormat(scale="norm1000", order="yxyx")
    assert to_original_pixels((500, 250, 1000, 750), gemini, size) == (160, 240, 480, 480)


def test_the_same_numbers_mean_different_boxes_under_different_conventions():
    """Never guessed from magnitudes: 0-1000 numbers on a 400 px image under `pixel` are clipped, not rescaled."""
    raw = (100, 100, 300, 300)
    assert to_original_pixels(raw, BoxFormat(scale="pixel"), (400, 400)) == (100, 100, 300, 300)
    assert to_original_pixels(raw, BoxFormat(scale="norm1000"), (400, 400)) == (40, 40, 120, 120)


def test_qwen25_pixel_boxes_refer_to_the_resized_image():
    fmt = BoxFormat(scale="pixel", resize=SmartResize(min_pixels=3136, max_pixels=1003520, factor=28))
    # a 1000x500 image is seen by the processor as 1008x504; [504, 252, 1008, 504] is its right-bottom quarter
    assert to_original_pixels((504, 252, 1008, 504), fmt, (1000, 500)) == (500, 250, 1000, 500)
    # sent at half size: the processor sees smart_resize(250, 500) = 252x504
    assert to_original_pixels((252, 126, 504, 252), fmt, (1000, 500), (500, 250)) == (500, 250, 1000, 500)
    # without the declared resize the same numbers are read as plain pixels of the sent image
    plain = BoxFormat(scale="pixel")
    assert to_original_pixels((252, 126, 504, 252), plain, (1000, 500), (500, 250)) == (504, 252, 1000, 500)


def test_padded_canvas_maps_through_the_content_size():
    # 1000x500 image shrunk to 500x250 and padded (top-left) to a 500x500 canvas; 0-1000 of the canvas
    fmt = BoxFormat(scale="norm1000")
    assert to_original_pixels((500, 250, 1000, 500), fmt, (1000, 500), (500, 500), (500, 250)) == (500, 250, 1000, 500)


def test_clip_swap_and_reject():
    fmt, size = BoxFormat(scale="pixel"), (100, 80)
    assert to_original_pixels((90, 70, 10, 20), fmt, size) == (10, 20, 90, 70)  # inverted corners swapped
    assert to_original_pixels((-10, -5, 150, 95), fmt, size) == (0, 0, 100, 80)  # clipped
    assert to_original_pixels((10, 10, 10, 50), fmt, size) is None  # zero width
    assert to_original_pixels((120, 10, 150, 50), fmt, size) is None  # entirely outside


# --- only the final answer's boxes -------------------------------------------------------------

def test_draft_boxes_before_the_final_answer_do_not_count():
    reply = ("The lesion is near the left hilum, roughly [100, 120, 300, 340]. Refining the edges:\n"
             "Final answer: [110, 130, 290, 330]")
    extraction = extract_boxes(reply)
    assert extraction.boxes == ((110, 130, 290, 330),) and extraction.path == "bracketed_list:after_final_marker"


def test_the_last_code_block_is_the_answer_when_there_are_several():
    reply = ('First guess:\n```json\n[{"box_2d": [100, 200, 300, 400]}]\n```\nOn reflection the opacity is lower:\n'
             '```json\n[{"box_2d": [500, 200, 700, 400], "label": "opacity"}]\n```')
    extraction = extract_boxes(reply)
    assert extraction.boxes == ((500, 200, 700, 400),) and extraction.path == "json:last_code_block"
    several = '```json\n[{"bbox_2d": [1, 2, 3, 4]}, {"bbox_2d": [5, 6, 7, 8]}]\n```'
    assert extract_boxes(several).boxes == ((1, 2, 3, 4), (5, 6, 7, 8))  # one answer, two boxes


def test_boxes_inside_reasoning_are_never_read():
    medgemma = ReasoningMarkers((("<unused94>", "<unused95>"), ("<think>", "</think>")))
    reply = ('<unused94>thought\nThe clavicle is at [50, 60, 200, 300]...<unused95>'
             '```json\n[{"box_2d": [40, 60, 210, 310], "label": "right clavicle"}]\n```')
    assert extract_boxes(reply, medgemma).boxes == ((40, 60, 210, 310),)
    assert extract_boxes("<unused94>thought\nmaybe [50, 60, 200, 300]", medgemma).path == "none"
    assert extract_boxes("<think>draft [1, 2, 3, 4]</think>[5, 6, 7, 8]").boxes == ((5, 6, 7, 8),)
