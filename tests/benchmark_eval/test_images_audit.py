"""What each registry model is shown, and how its boxes come back, against independent computations.

Every expectation is recomputed in `support.image_audit` (numpy, Pillow, fractions; Qwen's published
smart_resize) from real PNGs written by Pillow into a release written with pyarrow, read back through
the release reader the runner uses. The package's own resize, outline and convention helpers are never
used to compute what is expected.
"""
from __future__ import annotations

import io
import math
import re

import numpy as np
import pytest
from PIL import Image

from mmbu.benchmark_eval.models import BoxFormat, default_registry
from mmbu.benchmark_eval.parser import ReasoningMarkers, extract_boxes, parse_box_string, to_original_pixels
from mmbu.benchmark_eval.records import read_records
from mmbu.benchmark_eval.release import iter_images, load_samples
from mmbu.benchmark_eval.runner.api import EvalConfig, run_eval
from mmbu.benchmark_eval.scoring import detection_counts
from mmbu.benchmark_eval.tasks import ImageTooLarge, prepare_image
from support.image_audit import (GREEN, box_inside, box_outline, decode, expected_frames, family_reply,
                                 mask_region_resized, perfect_answer, png_bytes, ring_l1, unit_in_original, write_task)
from support.openai_server import OpenAIServer

REGISTRY = default_registry()
ENTRIES = {entry.name: entry for entry in REGISTRY.models}


def _prep_groups() -> dict[str, object]:
    """One entry per distinct image preparation (resize rule + image limits): the others prepare identically."""
    groups: dict[tuple, object] = {}
    for entry in REGISTRY.models:
        key = (entry.box_format.model_dump_json(include={"resize"}), entry.image.model_dump_json())
        groups.setdefault(key, entry)
    return {entry.name: entry for entry in groups.values()}


PREP = _prep_groups()
BACKGROUND = (200, 40, 90)    # a content colour no padding fill or outline uses
GREY = (90, 90, 90)

# (w, h): thumbnails, a one-pixel image, long thin images both ways, common camera sizes, odd sizes, and an
# 8000x40 image that passes Qwen's 200:1 limit before rounding and fails it after.
SIZES = [(1, 1), (2, 1), (27, 29), (3000, 20), (20, 3000), (1024, 768), (4000, 3000), (333, 217), (1001, 999),
         (897, 5), (673, 673), (8000, 40)]
# Downscales exact in rationals but not in floats (1317 x 896/1317 = 895.9999999999999, 276 x 672/736 =
# 251.99999999999997): the long side is max_side exactly and 276x736 becomes 252x672.
EXACT_SIZES = [(1317, 14), (1077, 808), (746, 1492), (2215, 1661), (1133, 850), (276, 736), (2240, 1792), (3584, 2688)]


def _row_id(size) -> str:
    return f"s{size[0]}x{size[1]}"


@pytest.fixture(scope="module")
def plain_release(tmp_path_factory):
    """Ungrounded rows of constant-colour RGB PNGs at every size."""
    root = tmp_path_factory.mktemp("sizes")
    rows = [{"sample_id": _row_id(size), "image": png_bytes(Image.new("RGB", size, BACKGROUND))}
            for size in SIZES + EXACT_SIZES]
    write_task(root, "ungrounded_classification", rows)
    return {item.sample_id: item for item in iter_images(root, "ungrounded_classification")}


def _check_sent_size(entry, item, size) -> None:
    expected = expected_frames(entry, *size)
    if expected is None:
        with pytest.raises(ImageTooLarge):
            prepare_image(item.image, entry)
        return
    content, sent, offset = expected
    prepared = prepare_image(item.image, entry)
    frames = prepared.frames
    assert (frames.image_size, frames.content_size, frames.sent_size, frames.content_offset) == \
        (size, content, sent, offset), entry.name
    pixels = decode(prepared.data)
    assert pixels.shape == (sent[1], sent[0], 3)
    inside = (slice(offset[1], offset[1] + content[1]), slice(offset[0], offset[0] + content[0]))
    assert (pixels[inside] == BACKGROUND).all()
    if sent != content:  # every pixel outside the content is the padding's fill
        padding = (pixels == entry.image.square_pad.fill).all(axis=-1)
        padding[inside] = True
        assert padding.all()


@pytest.mark.parametrize("model", list(PREP))
def test_the_sent_size_and_padding_are_the_models_own_rule(plain_release, model):
    entry = PREP[model]
    for size in SIZES:
        _check_sent_size(entry, plain_release[_row_id(size)], size)


@pytest.mark.parametrize("model", list(PREP))
def test_a_downscale_that_is_exact_in_rationals_is_exact(plain_release, model):
    entry = PREP[model]
    for size in EXACT_SIZES:
        _check_sent_size(entry, plain_release[_row_id(size)], size)


def test_every_registry_entry_prepares_like_one_of_the_checked_groups():
    for entry in REGISTRY.models:
        assert any(e.image == entry.image and e.box_format.resize == entry.box_format.resize for e in PREP.values())


# --- the box outline ----------------------------------------------------------------------------------

BOX_CASES = {
    "interior": ((1024, 768), (100.5, 200.25, 400.75, 500.0)),
    "touching_top_left": ((1024, 768), (0.0, 0.0, 300.0, 200.0)),
    "touching_bottom_right": ((1024, 768), (700.0, 500.0, 1024.0, 768.0)),
    "one_pixel_of_4000x3000": ((4000, 3000), (2001.0, 1499.0, 2002.0, 1500.0)),
    # edges that land exactly on resized pixel edges (1000 x 1148/4000 = 287): no gap before the outline
    "edges_on_resized_pixel_edges": ((4000, 3000), (1000.0, 1000.0, 2000.0, 1500.0)),
    "smaller_than_the_resize_factor": ((4000, 3000), (2000.0, 1000.0, 2003.0, 1002.0)),
    "one_pixel_upscaled": ((27, 29), (13.0, 14.0, 14.0, 15.0)),
    "thin_image": ((3000, 20), (1500.0, 5.0, 1510.0, 15.0)),
    "whole_image": ((4000, 3000), (0.0, 0.0, 4000.0, 3000.0)),
}


@pytest.fixture(scope="module")
def box_release(tmp_path_factory):
    root = tmp_path_factory.mktemp("boxes")
    rows = [{"sample_id": name, "image": png_bytes(Image.new("RGB", size, GREY)), "boxes": [list(box)]}
            for name, (size, box) in BOX_CASES.items()]
    write_task(root, "box_grounded_classification", rows)
    rows = load_samples(root, "box_grounded_classification")
    boxes = {row["sample_id"]: [list(b) for b in row["boxes"]] for _, row in rows.iterrows()}
    return {item.sample_id: (item, boxes[item.sample_id]) for item in iter_images(root, "box_grounded_classification")}


@pytest.mark.parametrize("model", list(PREP))
@pytest.mark.parametrize("case", [c for c in BOX_CASES if c != "whole_image"])
def test_the_green_outline_lies_just_outside_the_resized_box(box_release, model, case):
    entry, (size, box) = PREP[model], BOX_CASES[case]
    item, boxes = box_release[case]
    expected = expected_frames(entry, *size)
    if expected is None:
        pytest.skip(f"{model} cannot take a {size} image")
    content, sent, offset = expected
    prepared = prepare_image(item.image, entry, boxes=boxes)
    pixels = decode(prepared.data)
    ring = box_outline(sent, content, offset, size, box)
    want = np.empty_like(pixels)
    want[...] = entry.image.square_pad.fill if sent != content else GREY
    want[offset[1]:offset[1] + content[1], offset[0]:offset[0] + content[0]] = GREY
    want[ring] = GREEN
    assert np.array_equal(pixels, want), f"{np.all(pixels == GREEN, axis=-1).sum()} green pixels, {ring.sum()} expected"
    assert not (ring & box_inside(sent, content, offset, size, box)).any()
    assert ring.any()


@pytest.mark.parametrize("model", list(PREP))
def test_a_box_over_the_whole_image_is_outlined_just_inside_its_edge(box_release, model):
    entry, (size, box) = PREP[model], BOX_CASES["whole_image"]
    item, boxes = box_release["whole_image"]
    content, sent, offset = expected_frames(entry, *size)
    pixels = decode(prepare_image(item.image, entry, boxes=boxes).data)
    want = np.empty_like(pixels)
    want[...] = entry.image.square_pad.fill if sent != content else GREY
    x, y, w, h = *offset, *content
    want[y:y + h, x:x + w] = GREEN  # no pixel lies outside the box: a 3-px frame on the image's own edge
    want[y + 3:y + h - 3, x + 3:x + w - 3] = GREY
    assert np.array_equal(pixels, want)


# --- the mask outline --------------------------------------------------------------------------------

def _mask(size, paint) -> np.ndarray:
    mask = np.zeros((size[1], size[0]), bool)
    paint(mask)
    return mask


def _holes(mask):
    mask[50:250, 50:350] = True
    mask[100:110, 100:300] = False      # a slit 10 px high: filled 3 px from each side
    mask[150:200, 150:154] = False      # a slit narrower than two line widths: filled completely
    mask[220, 200] = False              # a one-pixel hole


def _corner(mask):
    mask[0:100, 0:120] = True


def _touches_every_border(mask):
    mask[0:300, 180:220] = True
    mask[130:170, 0:400] = True


MASK_CASES = {"holes": ((400, 300), _holes), "corner": ((400, 300), _corner),
              "cross": ((400, 300), _touches_every_border)}


def test_a_mask_over_the_whole_image_is_outlined_just_inside_its_edge(tmp_path):
    size = (400, 300)
    write_task(tmp_path, "mask_grounded_classification", [
        {"sample_id": "all", "image": png_bytes(Image.new("RGB", size, GREY)),
         "mask": png_bytes(Image.new("L", size, 255))}])
    item = next(iter_images(tmp_path, "mask_grounded_classification"))
    pixels = decode(prepare_image(item.image, ENTRIES["google/gemma-3-4b-it"], mask_png=item.mask).data)
    want = np.full_like(pixels, GREEN)
    want[3:-3, 3:-3] = GREY
    assert np.array_equal(pixels, want)


@pytest.mark.parametrize("case", list(MASK_CASES))
def test_the_mask_outline_rings_the_region_and_never_covers_it(tmp_path, case):
    size, paint = MASK_CASES[case]
    mask = _mask(size, paint)
    entry = ENTRIES["google/gemma-3-4b-it"]   # 400x300 is sent as it is: the ring alone is compared
    write_task(tmp_path, "mask_grounded_classification", [
        {"sample_id": case, "image": png_bytes(Image.new("RGB", size, GREY)),
         "mask": png_bytes(Image.fromarray(mask.astype(np.uint8) * 255))}])
    item = next(iter_images(tmp_path, "mask_grounded_classification"))
    pixels = decode(prepare_image(item.image, entry, mask_png=item.mask).data)
    ring = ring_l1(mask_region_resized(mask, size))
    want = np.empty_like(pixels)
    want[...] = GREY
    want[ring] = GREEN
    assert np.array_equal(pixels, want)
    assert not (np.all(pixels == GREEN, axis=-1) & mask).any()


def _speck(mask):
    mask[1000:1002, 2001:2003] = True   # 2x2 px of a 4000x3000 image: under a third of one resized pixel


def _ellipse(mask):
    h, w = mask.shape
    ys, xs = np.mgrid[0:h, 0:w]
    mask[((xs - 0.41 * w) / (0.17 * w)) ** 2 + ((ys - 0.57 * h) / (0.23 * h)) ** 2 <= 1] = True


RESIZED_MASK_CASES = {"speck": ((4000, 3000), _speck), "ellipse_down": ((1024, 768), _ellipse),
                      "ellipse_up": ((27, 29), _ellipse), "thin_up": ((333, 217), _ellipse)}


@pytest.mark.parametrize("model", list(PREP))
@pytest.mark.parametrize("case", list(RESIZED_MASK_CASES))
def test_a_resized_mask_keeps_every_pixel_it_touches(tmp_path, model, case):
    """The region on the resized image is every resized pixel holding any part of the mask (as a box's edges are
    floored/ceiled), so a small region is still outlined and the ring never paints a pixel that shows the region.
    Before: the mask was resized NEAREST: a 2x2 speck on a 4000x3000 image vanished for LLaVA, Gemma 3 and
    MedGemma 1.5 (no green pixel), and resized pixels partly inside an ellipse's edge were painted green."""
    entry, (size, paint) = PREP[model], RESIZED_MASK_CASES[case]
    expected = expected_frames(entry, *size)
    if expected is None:
        pytest.skip(f"{model} cannot take a {size} image")
    content, sent, offset = expected
    mask = _mask(size, paint)
    write_task(tmp_path, "mask_grounded_classification", [
        {"sample_id": case, "image": png_bytes(Image.new("RGB", size, GREY)),
         "mask": png_bytes(Image.fromarray(mask.astype(np.uint8) * 255))}])
    item = next(iter_images(tmp_path, "mask_grounded_classification"))
    pixels = decode(prepare_image(item.image, entry, mask_png=item.mask).data)
    region = mask_region_resized(mask, content)
    ring = np.zeros((sent[1], sent[0]), bool)
    ring[offset[1]:offset[1] + content[1], offset[0]:offset[0] + content[0]] = ring_l1(region)
    green = np.all(pixels == GREEN, axis=-1)
    assert ring.any()
    assert np.array_equal(green, ring), f"{green.sum()} green pixels, {ring.sum()} expected"


def test_a_mask_of_another_size_is_an_invalid_sample_record(tmp_path):
    write_task(tmp_path / "release", "mask_grounded_classification", [
        {"sample_id": "other-size", "image": png_bytes(Image.new("RGB", (320, 240), GREY)),
         "mask": png_bytes(Image.fromarray(np.full((200, 320), 255, np.uint8)))}])
    with OpenAIServer() as server:
        report = run_eval(EvalConfig(release_dir=tmp_path / "release", runs_dir=tmp_path / "runs",
                                     model="Qwen/Qwen2.5-VL-7B-Instruct", base_urls=(server.url,),
                                     templates=("no_context",), retry_backoff=0.01, timeout=5))
        assert server.calls == []
    records = read_records(tmp_path / "runs" / "Qwen__Qwen2.5-VL-7B-Instruct" / "predictions.jsonl")
    assert report.exit_code == 1 and len(records) == 2
    assert {(r.status, r.error_reason) for r in records} == {("error", "invalid_sample")}
    assert "the mask is 320x200 but the image is 320x240" in records[0].error


@pytest.mark.parametrize("model", ["Qwen/Qwen2.5-VL-7B-Instruct", "google/gemma-3-4b-it"])
def test_an_empty_mask_is_an_invalid_sample_record_not_an_image_without_outline(tmp_path, model):
    """Before: the image went out with no green pixel while the question said the region is outlined in green."""
    write_task(tmp_path / "release", "mask_grounded_classification", [
        {"sample_id": "empty", "image": png_bytes(Image.new("RGB", (320, 240), GREY)),
         "mask": png_bytes(Image.new("L", (320, 240), 0))},
        {"sample_id": "fine", "image": png_bytes(Image.new("RGB", (320, 240), GREY)),
         "mask": png_bytes(Image.fromarray(_mask((320, 240), _corner).astype(np.uint8) * 255))}])
    with OpenAIServer() as server:
        run_eval(EvalConfig(release_dir=tmp_path / "release", runs_dir=tmp_path / "runs", model=model,
                            base_urls=(server.url,), templates=("no_context",), retry_backoff=0.01, timeout=5))
        assert len(server.calls) == 2                                   # only the row with a region was asked
        assert all(np.all(decode_call(call) == GREEN, axis=-1).any() for call in server.calls)
    records = read_records(tmp_path / "runs" / ENTRIES[model].slug / "predictions.jsonl")
    empty = [r for r in records if r.sample_id == "empty"]
    assert len(empty) == 2 and {(r.status, r.error_reason) for r in empty} == {("error", "invalid_sample")}
    assert "the mask is empty" in empty[0].error


def decode_call(call) -> np.ndarray:
    return np.asarray(call.image().convert("RGB"))


# --- colour ---------------------------------------------------------------------------------------------

def test_grey_and_palette_pngs_reach_the_model_with_their_own_colours(tmp_path):
    ramp = np.tile(np.arange(256, dtype=np.uint8), (8, 1))
    palette = Image.fromarray(ramp % 4, "P")
    palette.putpalette([0, 0, 0, 10, 200, 30, 250, 250, 0, 5, 6, 7] + [0] * (768 - 12))
    write_task(tmp_path, "ungrounded_classification", [
        {"sample_id": "grey", "image": png_bytes(Image.fromarray(ramp, "L"))},
        {"sample_id": "palette", "image": png_bytes(palette)}])
    images = {item.sample_id: item.image for item in iter_images(tmp_path, "ungrounded_classification")}
    entry = ENTRIES["Qwen/Qwen3-VL-8B-Instruct"]   # 256x8 is sent at its own size
    grey = decode(prepare_image(images["grey"], entry).data)
    assert (grey == ramp[..., None]).all()
    colours = np.array([[0, 0, 0], [10, 200, 30], [250, 250, 0], [5, 6, 7]], np.uint8)
    assert np.array_equal(decode(prepare_image(images["palette"], entry).data), colours[ramp % 4])


def _colour_release(tmp_path, images: dict[str, Image.Image]) -> dict[str, bytes]:
    write_task(tmp_path, "ungrounded_classification",
               [{"sample_id": name, "image": png_bytes(image)} for name, image in images.items()])
    return {item.sample_id: item.image for item in iter_images(tmp_path, "ungrounded_classification")}


def test_a_16_bit_grey_png_is_scaled_to_8_bits_not_clipped(tmp_path):
    """A 16-bit sample v means v/65535 of full scale (PNG spec), i.e. round(v * 255 / 65535) in 8 bits. Before:
    Pillow's convert clipped at 255, so every value from 255 up (1/257 of full scale) was sent as white."""
    values = (np.arange(64 * 48, dtype=np.uint32) * 65535 // (64 * 48 - 1)).astype(np.uint16).reshape(48, 64)
    image = Image.fromarray(values)
    assert image.mode == "I;16"
    sixteen = _colour_release(tmp_path, {"i16": image})["i16"]
    assert Image.open(io.BytesIO(sixteen)).mode == "I;16"
    eight = ((values.astype(np.uint64) * 255 + 32767) // 65535).astype(np.uint8)
    as_sent = decode(prepare_image(sixteen, ENTRIES["Qwen/Qwen3-VL-8B-Instruct"]).data)      # 64x48: not resized
    assert np.array_equal(as_sent, np.repeat(eight[..., None], 3, axis=2))
    qwen25 = ENTRIES["Qwen/Qwen2.5-VL-7B-Instruct"]                                           # resized to 56x56
    content, _, _ = expected_frames(qwen25, 64, 48)
    resized = np.asarray(Image.fromarray(eight).convert("RGB").resize(content, Image.Resampling.BICUBIC))
    assert np.array_equal(decode(prepare_image(sixteen, qwen25).data), resized)


def _on_white(rgb: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    """Alpha over white, written out: c a/255 + 255 (1 - a/255), rounded."""
    a = alpha.astype(np.float64)[..., None] / 255
    return np.rint(rgb.astype(np.float64) * a + 255 * (1 - a)).astype(np.int64)


def test_transparency_is_composited_on_white(tmp_path):
    """RGBA, LA, palette and colour-key (tRNS) transparency over white, as the build flattens its sources and as
    vLLM flattens an RGBA upload (vllm/multimodal/image.py rgba_to_rgb, background (255, 255, 255)). Before:
    convert('RGB') dropped alpha, so a fully transparent pixel was sent as whatever colour it stored (here red
    or black) and the model saw content the image does not show."""
    h, w = 48, 64
    rgb = np.zeros((h, w, 3), np.uint8)
    rgb[..., 0] = 220
    rgb[..., 2] = np.arange(w, dtype=np.uint8)[None, :]
    alpha = np.zeros((h, w), np.uint8)
    alpha[:16] = 255                                                  # opaque
    alpha[16:32] = np.arange(w, dtype=np.uint8)[None, :] * 4          # partial, 0..252
    # rows 32..47 fully transparent
    grey = np.full((h, w), 30, np.uint8)
    palette = Image.fromarray((np.arange(h)[:, None] // 16 + np.zeros(w, int)).astype(np.uint8), "P")
    palette.putpalette([200, 10, 10, 10, 200, 10, 10, 10, 200] + [0] * (768 - 9))
    keyed_grey = Image.fromarray(np.where(np.arange(h)[:, None] < 24, 30, 7).astype(np.uint8).repeat(w, axis=1))
    keyed_rgb = Image.fromarray(np.where((np.arange(h) < 24)[:, None, None], rgb, np.uint8(9)))
    pngs = {"rgba": png_bytes(Image.fromarray(np.dstack([rgb, alpha]), "RGBA")),
            "la": png_bytes(Image.fromarray(np.dstack([grey, alpha]), "LA")),
            "palette": png_bytes(palette, transparency=bytes([255, 0, 128])),   # index 1 clear, index 2 half
            "keyed_grey": png_bytes(keyed_grey, transparency=7),
            "keyed_rgb": png_bytes(keyed_rgb, transparency=(9, 9, 9))}
    write_task(tmp_path, "ungrounded_classification", [{"sample_id": name, "image": data} for name, data in pngs.items()])
    images = {item.sample_id: item.image for item in iter_images(tmp_path, "ungrounded_classification")}
    assert {name: Image.open(io.BytesIO(data)).mode for name, data in images.items()} == \
        {"rgba": "RGBA", "la": "LA", "palette": "P", "keyed_grey": "L", "keyed_rgb": "RGB"}
    colours = np.array([[200, 10, 10], [10, 200, 10], [10, 10, 200]])
    index = np.arange(h)[:, None] // 16 + np.zeros(w, int)
    want = {
        "rgba": _on_white(rgb, alpha),
        "la": _on_white(np.repeat(grey[..., None], 3, axis=2), alpha),
        "palette": _on_white(colours[index], np.array([255, 0, 128], np.uint8)[index]),
        "keyed_grey": np.where((np.arange(h) < 24)[:, None, None], 30, 255) + np.zeros((h, w, 3), np.int64),
        "keyed_rgb": np.where((np.arange(h) < 24)[:, None, None], rgb, 255).astype(np.int64),
    }
    entry = ENTRIES["Qwen/Qwen3-VL-8B-Instruct"]                      # 64x48 is sent at its own size
    for name, expected in want.items():
        sent = decode(prepare_image(images[name], entry).data).astype(np.int64)
        assert np.abs(sent - expected).max() <= 1, name               # Pillow's compositing may round the other way
        assert (sent[32:] == expected[32:]).all(), name                # fully transparent: exactly the background
    # the resize path (Qwen2.5-VL at 56x56) composites before resizing, as the release image means
    qwen25 = ENTRIES["Qwen/Qwen2.5-VL-7B-Instruct"]
    content, _, _ = expected_frames(qwen25, w, h)
    flat = Image.fromarray(_on_white(rgb, alpha).astype(np.uint8)).resize(content, Image.Resampling.BICUBIC)
    sent = decode(prepare_image(images["rgba"], qwen25).data).astype(np.int64)
    assert np.abs(sent - np.asarray(flat).astype(np.int64)).max() <= 1


# --- boxes back to the original image -------------------------------------------------------------------

ROUND_TRIP_SIZES = [(27, 29), (333, 217), (1024, 768), (4000, 3000), (3000, 20), (20, 3000), (1001, 999)]


def _gold(size):
    w, h = size
    return (round(w * 0.21, 1), round(h * 0.34, 1), round(w * 0.67, 1), round(h * 0.88, 1))


def _reasoning(entry) -> ReasoningMarkers:
    return ReasoningMarkers(tuple({entry.chat.thinking_tags or ("<think>", "</think>"), ("<think>", "</think>")}))


@pytest.mark.parametrize("model", list(ENTRIES))
def test_a_perfect_answer_in_the_declared_convention_maps_back_exactly(model):
    """As floats, the model's frame and the parse back are exact (1e-6 px); only the model's rounding adds error."""
    entry = ENTRIES[model]
    for size in ROUND_TRIP_SIZES:
        expected = expected_frames(entry, *size)
        if expected is None:
            continue
        content, sent, offset = expected
        gold = _gold(size)
        for integers in (False, True):
            values = perfect_answer(entry, size, content, sent, offset, gold, integers=integers)
            extraction = extract_boxes(family_reply(entry, values, "nucleus"), _reasoning(entry))
            assert len(extraction.boxes) == 1, extraction
            back = to_original_pixels(extraction.boxes[0], entry.box_format, size, sent, content, offset)
            tolerance = unit_in_original(entry, size, content, sent) if integers else 1e-6
            assert max(abs(a - b) for a, b in zip(back, gold)) <= tolerance + 1e-9, (size, values, back, gold)


def test_original_pixels_from_a_model_declared_to_answer_in_sent_pixels_are_not_accepted():
    """Qwen2.5-VL answers pixels of the smart-resized image; the original image's pixels read that way miss."""
    entry = ENTRIES["Qwen/Qwen2.5-VL-7B-Instruct"]
    size, gold = (4000, 3000), (1000.0, 750.0, 2000.0, 1500.0)
    content, sent, offset = expected_frames(entry, *size)
    assert content == sent == (1148, 840)
    reply = family_reply(entry, list(gold), "nucleus")
    box = to_original_pixels(extract_boxes(reply).boxes[0], entry.box_format, size, sent, content, offset)
    assert box[0] == pytest.approx(1000 * 4000 / 1148) and box[2] == 4000   # scaled by 3.48, then clipped
    assert detection_counts([box], [gold]) == (0, 1, 1)
    right = perfect_answer(entry, size, content, sent, offset, gold, integers=True)
    fixed = to_original_pixels(extract_boxes(family_reply(entry, right, "nucleus")).boxes[0], entry.box_format,
                               size, sent, content, offset)
    assert detection_counts([fixed], [gold]) == (1, 0, 0)


E2E_SIZES = [(27, 29), (333, 217), (1024, 768), (4000, 3000), (3000, 20)]
_TARGET = re.compile(r'"(target-\d+)"')


@pytest.fixture(scope="module")
def detection_release(tmp_path_factory):
    root = tmp_path_factory.mktemp("detection")
    rows = []
    for index, size in enumerate(E2E_SIZES):
        gold = _gold(size)
        w, h = size
        decoys = [(0.0, 0.0, float(w), float(h)), (w * 0.05, h * 0.05, w * 0.15, h * 0.2),
                  (w * 0.5, 0.0, float(w), h * 0.3)]
        options = [f"[{gold[0]:g}, {gold[1]:g}, {gold[2]:g}, {gold[3]:g}]"] + \
                  [f"[{b[0]:g}, {b[1]:g}, {b[2]:g}, {b[3]:g}]" for b in decoys] + ["None of the above"]
        rows.append({"sample_id": f"det-{index}", "image": png_bytes(Image.new("RGB", size, GREY)),
                     "boxes": [list(gold)], "target": f"target-{index}", "answer": options[0], "options": options,
                     "question_no_context": f'Where is the "target-{index}"?'})
    return write_task(root, "object_detection", rows)


@pytest.mark.parametrize("model", list(ENTRIES))
def test_detection_through_the_runner_maps_back_to_the_release_boxes(detection_release, tmp_path, model):
    """Open: a perfect, rounded answer in the family's style comes back within the rounding of the model's
    convention. Closed: each candidate box is shown in the model's convention (within half a step of the exact
    value) and maps back to the release's candidate within that rounding."""
    entry = ENTRIES[model]
    gold = {f"target-{i}": (size, _gold(size)) for i, size in enumerate(E2E_SIZES)}

    def answer(call) -> str:
        target = _TARGET.search(call.prompt).group(1)
        size, box = gold[target]
        content, sent, offset = expected_frames(entry, *size)
        if call.options:
            return "Answer: A"
        return family_reply(entry, perfect_answer(entry, size, content, sent, offset, box, integers=True), target)

    with OpenAIServer(responder=answer) as server:
        run_eval(EvalConfig(release_dir=detection_release, runs_dir=tmp_path, model=model, base_urls=(server.url,),
                            templates=("no_context",), retry_backoff=0.01, timeout=10, max_attempts=1))
        prompts = {(_TARGET.search(c.prompt).group(1), bool(c.options)): c for c in server.calls}
    records = read_records(tmp_path / entry.slug / "predictions.jsonl")
    rows = load_samples(detection_release, "object_detection").set_index("sample_id")
    for record in records:
        size, box = gold[rows.loc[record.sample_id, "target"]]
        expected = expected_frames(entry, *size)
        if expected is None:
            assert record.status == "error" and record.error_reason == "image_too_large"
            continue
        content, sent, offset = expected
        assert record.status == "ok" and tuple(record.image_size) == size
        assert (tuple(record.content_size), tuple(record.sent_size), tuple(record.content_offset or (0, 0))) == \
            (content, sent, offset)
        fmt = BoxFormat.model_validate(record.box_format)
        tolerance = unit_in_original(entry, size, content, sent) + 1e-9
        if record.form == "open":
            boxes = extract_boxes(record.output, _reasoning(entry)).boxes
            back = to_original_pixels(boxes[0], fmt, size, record.sent_size, record.content_size, record.content_offset)
            assert max(abs(a - b) for a, b in zip(back, box)) <= tolerance, (record.output, back, box)
            assert detection_counts([back], [box]) == (1, 0, 0)
            continue
        call = prompts[(rows.loc[record.sample_id, "target"], True)]
        candidates = [parse_box_string(o) for o in rows.loc[record.sample_id, "options"]]
        for letter, candidate in zip("ABCD", candidates):
            shown = parse_box_string(call.options[letter])
            exact = perfect_answer(entry, size, content, sent, offset, candidate, integers=False)
            step = 0.001 if fmt.scale == "norm1" else 1.0
            assert all(abs(s - e) <= step / 2 + 1e-9 for s, e in zip(shown, exact)), (call.options[letter], exact)
            back = to_original_pixels(shown, fmt, size, record.sent_size, record.content_size, record.content_offset)
            clipped = [min(max(v, 0), lim) for v, lim in zip(candidate, (*size, *size))]
            assert max(abs(a - b) for a, b in zip(back, clipped)) <= tolerance, (call.options[letter], back, candidate)
        assert call.options["E"] == "None of the above"
