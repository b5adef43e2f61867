"""An image the model would see unchanged is sent as the release's own PNG; everything else is re-encoded."""
from __future__ import annotations

import io
import zlib

import numpy as np
import pytest
from PIL import Image

from mmbu.benchmark_eval.models import ModelEntry, default_registry
from mmbu.benchmark_eval.tasks import ImageUnreadable, plan_frames, prepare_image
from support.eval_release import object_image, png

QWEN3 = default_registry().get("Qwen/Qwen3-VL-8B-Instruct")
LLAVA = default_registry().get("LLaVA-v1.5-7B")
SIZE = (320, 256)   # within Qwen3-VL's pixel cap (the registry sends its images at their own size below it)


def pixels(data: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))


def test_the_size_used_here_needs_no_resize_for_qwen3():
    frames = plan_frames(SIZE, QWEN3)
    assert frames.content_size == frames.sent_size == SIZE


@pytest.mark.parametrize("mode", ["RGB", "L"])
def test_an_unchanged_grey_or_rgb_png_is_sent_byte_for_byte(mode):
    original = png(object_image(SIZE, (40, 40, 120, 100), seed=2).convert(mode))
    prepared = prepare_image(original, QWEN3)
    assert prepared.data == original and prepared.mime == "image/png"
    assert prepared.frames.image_size == prepared.frames.sent_size == SIZE
    # the model's processor reads it as RGB: the same pixels the re-encoding path would have sent
    assert np.array_equal(pixels(prepared.data), np.asarray(Image.open(io.BytesIO(original)).convert("RGB")))


def test_a_resized_padded_or_annotated_image_is_re_encoded():
    original = png(object_image(SIZE, (40, 40, 120, 100), seed=2))
    llava = prepare_image(original, LLAVA)                      # LLaVA pads to a square canvas
    assert llava.data != original and Image.open(io.BytesIO(llava.data)).size == llava.frames.sent_size
    boxed = prepare_image(original, QWEN3, boxes=[[40, 40, 120, 100]])
    assert boxed.data != original
    assert (pixels(boxed.data)[37, 60] == (0, 255, 0)).all()   # the ROI outline is drawn just outside the box
    big = png(object_image((1600, 1200), (40, 40, 120, 100), seed=2))   # over the 1,003,520-pixel cap
    shrunk = prepare_image(big, QWEN3)
    assert shrunk.data != big and Image.open(io.BytesIO(shrunk.data)).size == shrunk.frames.content_size != (1600, 1200)


@pytest.mark.parametrize(("convert", "sent_mode"), [
    (lambda image: image.convert("P"), "RGB"),                                           # palette
    (lambda image: image.convert("RGBA"), "RGB"),                                        # alpha
    # 16-bit grey becomes 8-bit grey, then sent as any grey image is (servers read it as RGB)
    (lambda image: Image.fromarray(np.asarray(image.convert("L")).astype(np.uint16) * 257), "L"),
])
def test_other_pixel_formats_are_converted_to_8_bit_rgb(convert, sent_mode):
    original = png(convert(object_image(SIZE, (40, 40, 120, 100), seed=3)))
    prepared = prepare_image(original, QWEN3)
    assert prepared.data != original
    assert Image.open(io.BytesIO(prepared.data)).mode == sent_mode


def test_a_png_over_the_byte_limit_takes_the_jpeg_path():
    original = png(Image.fromarray(np.random.default_rng(0).integers(0, 255, (256, 320, 3), dtype=np.uint8)))
    capped = ModelEntry(**{**QWEN3.model_dump(), "name": "capped", "display_name": "capped", "hf_id": "x/capped",
                           "aliases": (), "image": {"max_bytes": 150_000}})  # noise: no PNG fits
    prepared = prepare_image(original, capped)
    assert len(original) > 150_000 and prepared.mime == "image/jpeg" and len(prepared.data) <= 150_000


def test_a_damaged_png_is_still_reported_as_unreadable():
    original = bytearray(png(object_image(SIZE, (40, 40, 120, 100), seed=4)))
    idat = original.index(b"IDAT")
    original[idat + 20] ^= 0xFF                                  # a flipped byte: the chunk CRC no longer matches
    assert zlib.crc32(bytes(original)) != zlib.crc32(png(object_image(SIZE, (40, 40, 120, 100), seed=4)))
    with pytest.raises(ImageUnreadable):
        prepare_image(bytes(original), QWEN3)


@pytest.mark.parametrize("size", [(320, 255), (255, 320)])   # odd differences: where does the spare row or column go?
@pytest.mark.parametrize(("model", "fill"), [("MedGemma-1.5-4B", (0, 0, 0)), ("LLaVA-v1.5-7B", (122, 116, 104))])
def test_square_padding_matches_the_models_own_preprocessing(size, model, fill):
    # Google-Health/medgemma@ca633909 cxr_anatomy_localization notebook: np.pad((d // 2, d - d // 2)) with 0;
    # haotian-liu/LLaVA@c121f043 expand2square: pasted at d // 2 on the CLIP mean. Both leave the spare pixel after.
    original = object_image(size, (40, 40, 120, 100), seed=5)
    prepared = prepare_image(png(original), default_registry().get(model))
    w, h = size
    d = abs(w - h)
    spread = ((d // 2, d - d // 2), (0, 0)) if h < w else ((0, 0), (d // 2, d - d // 2))
    source = np.asarray(original)
    expected = np.stack([np.pad(source[..., c], spread, constant_values=fill[c]) for c in range(3)], axis=-1)
    assert np.array_equal(pixels(prepared.data), expected)
