"""The fast preparation path sends exactly the pixels of the plain one: lossless fast PNG, grey kept grey."""
from __future__ import annotations

import io

import numpy as np
import pytest
import orjson
from PIL import Image

from mmbu.benchmark_eval.models import default_registry
from mmbu.benchmark_eval.tasks import prepare_image
from mmbu.benchmark_eval.tasks.images import encode_png_fast
from support.eval_release import object_image, png

QWEN25 = default_registry().get("Qwen/Qwen2.5-VL-7B-Instruct")
LLAVA = default_registry().get("LLaVA-v1.5-7B")
SIZE = (1024, 768)   # Qwen2.5-VL smart-resizes it to 1036x756: decoded, resized and re-encoded


def as_model_sees(data: bytes) -> np.ndarray:
    """What a server hands the processor: the PNG decoded and read as RGB."""
    return np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))


@pytest.mark.parametrize("mode", ["RGB", "L"])
def test_the_fast_png_is_lossless(mode):
    image = object_image((333, 217), (20, 30, 120, 90), seed=5).convert(mode)
    decoded = Image.open(io.BytesIO(encode_png_fast(image)))
    assert decoded.format == "PNG" and decoded.mode == mode and decoded.size == image.size
    assert np.array_equal(np.asarray(decoded), np.asarray(image))


def test_a_grey_image_is_resized_and_sent_grey_with_the_pixels_the_rgb_path_gives():
    grey = object_image(SIZE, (100, 80, 400, 300), seed=7).convert("L")
    prepared = prepare_image(png(grey), QWEN25)
    sent = Image.open(io.BytesIO(prepared.data))
    assert sent.mode == "L" and sent.size == prepared.frames.sent_size == (1036, 756)
    # the plain path: decode, read as RGB, resize bicubic (what Qwen's qwen-vl-utils does)
    expected = np.asarray(grey.convert("RGB").resize((1036, 756), Image.Resampling.BICUBIC))
    assert np.array_equal(as_model_sees(prepared.data), expected)


def test_an_rgb_resize_sends_the_bicubic_pixels():
    rgb = object_image(SIZE, (100, 80, 400, 300), seed=8)
    prepared = prepare_image(png(rgb), QWEN25)
    assert Image.open(io.BytesIO(prepared.data)).mode == "RGB"
    assert np.array_equal(as_model_sees(prepared.data), np.asarray(rgb.resize((1036, 756), Image.Resampling.BICUBIC)))


@pytest.mark.parametrize("roi", ["box", "padding"])
def test_a_grey_image_with_a_green_outline_or_a_coloured_pad_is_sent_as_rgb(roi):
    grey = png(object_image((600, 400), (100, 80, 300, 200), seed=9).convert("L"))
    prepared = prepare_image(grey, QWEN25, boxes=[[100.0, 80.0, 300.0, 200.0]]) if roi == "box" else \
        prepare_image(grey, LLAVA)
    pixels = as_model_sees(prepared.data)
    assert Image.open(io.BytesIO(prepared.data)).mode == "RGB"
    colour = (0, 255, 0) if roi == "box" else (122, 116, 104)
    assert (pixels == colour).all(axis=2).any()


def test_the_data_url_spliced_into_request_bodies_is_the_json_string_of_the_data_url():
    prepared = prepare_image(png(object_image((300, 200), (20, 20, 80, 60), seed=3)), QWEN25)
    assert prepared.url_json == orjson.dumps(prepared.data_url)
    body = orjson.dumps({"url": orjson.Fragment(prepared.url_json)})
    assert orjson.loads(body)["url"] == prepared.data_url
