"""Conventions checked against the models' own image processors, executably (issue 29 point 6).

The registered families' `transformers` image processors run here on NumPy and Pillow alone (their PIL
backends; no torch, no weights, no network), configured from verbatim copies of the families'
`preprocessor_config.json` (data/processor_configs/PROVENANCE.md). Each test sends an image through the
toolkit's own runner path (`prepare_image`: resize, padding), hands the bytes to the processor as a server
would, finds a bright rectangle in what the processor makes of them, and compares its place with the
toolkit's box mapping (`to_model_convention` / `to_original_pixels`) at pixel level.

* Qwen2.5-VL (and the registry's Qwen2.5-VL derivatives): the processor's own smart resize equals the
  toolkit's for every size, the sent size is a fixed point of it (the server leaves the image as sent), and a
  box in the processor's pixels maps back onto the original box.
* Gemma 3 / MedGemma: the processor squeezes the sent image to 896 x 896 without keeping its aspect;
  0-1000 relative boxes (x-first for Gemma 3 and MedGemma 1, y-first on the centre-padded square for
  MedGemma 1.5) land where the toolkit says.

Not checked here: InternVL3.5 (the registered checkpoint's tiling is the model repository's own remote code,
not a transformers processor), LLaVA-1.5 and Qwen3-VL (their processor configurations were not read from a
public copy in this session).
"""
import io
import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from transformers.models.gemma3.image_processing_pil_gemma3 import Gemma3ImageProcessorPil
from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

from mmbu.benchmark_eval.models.box_format import model_frame_size, smart_resize, to_model_convention
from mmbu.benchmark_eval.models.registry import default_registry
from mmbu.benchmark_eval.parser import to_original_pixels
from mmbu.benchmark_eval.tasks.images import plan_frames, prepare_image
from mmbu.core.boxes import iou

CONFIGS = Path(__file__).parent / "data" / "processor_configs"
REGISTRY = default_registry()
QWEN = REGISTRY.get("Qwen/Qwen2.5-VL-7B-Instruct")


def processor_config(name: str) -> dict:
    config = json.loads((CONFIGS / name).read_text(encoding="utf-8"))
    return {k: v for k, v in config.items() if k not in ("image_processor_type", "processor_class", "image_seq_length")
            and v is not None}


def qwen_processor(max_pixels: int | None = None) -> Qwen2VLImageProcessorPil:
    config = processor_config("qwen2_5_vl_preprocessor_config.json")
    if max_pixels is not None:
        config["max_pixels"] = max_pixels  # the registry's server setting (--mm-processor-kwargs)
    return Qwen2VLImageProcessorPil(**config)


def picture(size: tuple[int, int], box: tuple[int, int, int, int]) -> bytes:
    """A dark-grey PNG with a white rectangle at `box` (x1, y1, x2, y2, exclusive ends)."""
    image = Image.new("RGB", size, (40, 40, 40))
    image.paste((255, 255, 255), box)
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def bright_box(plane: np.ndarray) -> tuple[float, float, float, float]:
    """(x1, y1, x2, y2) of the pixels brighter than half-way between the plane's darkest and brightest."""
    threshold = (plane.min() + plane.max()) / 2
    ys, xs = np.nonzero(plane > threshold)
    return float(xs.min()), float(ys.min()), float(xs.max() + 1), float(ys.max() + 1)


def qwen_pixels(data: bytes, processor: Qwen2VLImageProcessorPil) -> np.ndarray:
    """The processor's patches put back together: the image it made, (H, W) of channel means."""
    image = np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))
    out = processor(images=image)
    _, grid_h, grid_w = (int(v) for v in out["image_grid_thw"][0])
    m, p, t = processor.merge_size, processor.patch_size, processor.temporal_patch_size
    patches = np.asarray(out["pixel_values"]).reshape(grid_h // m, grid_w // m, m, m, 3, t, p, p)[:, :, :, :, :, 0]
    image = patches.transpose(4, 0, 2, 5, 1, 3, 6).reshape(3, grid_h * p, grid_w * p)
    return image.mean(axis=0)


SIZES = [(640, 480), (1500, 840), (4000, 3000), (37, 401), (30, 30), (2000, 20), (1003, 1001)]


@pytest.mark.parametrize("size", SIZES)
def test_qwen25_smart_resize_is_the_processors(size):
    """The toolkit's smart_resize is the Qwen2.5-VL processor's own, at the registry's pixel limits."""
    resize = QWEN.box_format.resize
    processor = qwen_processor(resize.max_pixels)
    width, height = size
    _, grid_h, grid_w = processor(images=np.zeros((height, width, 3), np.uint8))["image_grid_thw"][0]
    assert (int(grid_h) * 14, int(grid_w) * 14) == smart_resize(height, width, resize.factor, resize.min_pixels,
                                                                 resize.max_pixels)


@pytest.mark.parametrize("size", SIZES)
def test_qwen25_the_sent_image_is_left_as_sent_by_the_server_processor(size):
    """The runner sends the image already smart-resized; the server's processor (its own, larger default limit)
    keeps that size, so pixel answers are in the frame the toolkit maps from."""
    frames = plan_frames(size, QWEN)
    processor = qwen_processor()  # the published config: max 12845056 pixels
    w, h = frames.sent_size
    _, grid_h, grid_w = processor(images=np.zeros((h, w, 3), np.uint8))["image_grid_thw"][0]
    assert (int(grid_w) * 14, int(grid_h) * 14) == frames.sent_size == model_frame_size(QWEN.box_format, frames.sent_size)


@pytest.mark.parametrize(("size", "box"), [((640, 480), (100, 60, 300, 200)), ((1500, 840), (700, 100, 1400, 800)),
                                           ((401, 37), (10, 5, 200, 30))])
def test_qwen25_a_box_in_the_processors_pixels_maps_back_to_the_original(size, box):
    prepared = prepare_image(picture(size, box), QWEN)
    frames = prepared.frames
    found = bright_box(qwen_pixels(prepared.data, qwen_processor()))  # what the model sees, in its pixels
    expected = to_model_convention(box, QWEN.box_format, frames.image_size, frames.content_size, frames.sent_size,
                                   frames.content_offset)
    assert np.allclose(found, expected, atol=2.0), (found, expected)
    back = to_original_pixels(found, QWEN.box_format, frames.image_size, frames.sent_size, frames.content_size,
                              frames.content_offset)
    assert iou(back, box) >= 0.95


def gemma_pixels(data: bytes) -> np.ndarray:
    processor = Gemma3ImageProcessorPil(**processor_config("gemma3_preprocessor_config.json"))
    image = np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))
    pixels = np.asarray(processor(images=image)["pixel_values"])[0]
    assert pixels.shape == (3, 896, 896)
    return pixels.mean(axis=0)


@pytest.mark.parametrize("model", ["google/gemma-3-4b-it", "google/medgemma-4b-it", "google/medgemma-1.5-4b-it"])
@pytest.mark.parametrize(("size", "box"), [((640, 480), (100, 60, 300, 200)), ((300, 1200), (50, 900, 250, 1150)),
                                           ((1024, 1024), (0, 0, 512, 256))])
def test_gemma3_relative_boxes_land_where_the_toolkit_says(model, size, box):
    entry = REGISTRY.get(model)
    prepared = prepare_image(picture(size, box), entry)
    frames = prepared.frames
    x1, y1, x2, y2 = bright_box(gemma_pixels(prepared.data))
    found = [x1 / 896 * 1000, y1 / 896 * 1000, x2 / 896 * 1000, y2 / 896 * 1000]
    if entry.box_format.order == "yxyx":
        found = [found[1], found[0], found[3], found[2]]
    expected = to_model_convention(box, entry.box_format, frames.image_size, frames.content_size, frames.sent_size,
                                   frames.content_offset)
    assert np.allclose(found, expected, atol=3.0), (found, expected)  # 3/1000 of the side: resampling edges
    back = to_original_pixels(found, entry.box_format, frames.image_size, frames.sent_size, frames.content_size,
                              frames.content_offset)
    assert iou(back, box) >= 0.95
