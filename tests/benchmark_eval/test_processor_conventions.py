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

* Qwen3-VL: transformers serves it with the Qwen2-VL processor at patch 16; the server's resize of the
  image the runner sends is the toolkit's smart_resize at factor 32 and the registry's max_pixels, and 0-1000
  boxes, relative to whatever size it picks, land where the toolkit says.
* LLaVA-1.5: its CLIP processor (shortest edge 336, centre crop 336) keeps the whole padded square the runner
  sends (the padding is the CLIP mean to the pixel, as the model was trained), so 0-1 boxes of the padded square
  land where the toolkit says; sent unpadded, the crop would cut off the sides, which is why the registry pads.
* InternVL3.5: the transformers-native InternVL processor (Got-OCR2's image processor with crop_to_patches)
  tiles the image the runner sends into the same 448-px grid as the original, and 0-1000 boxes of the original
  land where the toolkit says in the stitched tiles and in the thumbnail.

Not checked here: LLaVA-Med (its checkpoint is the original LLaVA code format, served only after conversion;
its vision tower's processor configuration was not read) and the frontier API models (no processor). The
registered InternVL3.5 checkpoint tiles with its repository's own remote code, which needs torch and is not
run: the transformers-native processor checked here is that code's port (the -HF checkpoints).
"""
import io
import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from transformers.models.clip.image_processing_pil_clip import CLIPImageProcessorPil
from transformers.models.gemma3.image_processing_pil_gemma3 import Gemma3ImageProcessorPil
from transformers.models.got_ocr2.image_processing_pil_got_ocr2 import (GotOcr2ImageProcessorPil,
                                                                      get_optimal_tiled_canvas)
from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

from mmbu.benchmark_eval.models.box_format import model_frame_size, smart_resize, to_model_convention
from mmbu.benchmark_eval.models.registry import ImageLimits, default_registry
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


def assert_relative_box(found_px, frame: tuple[int, int], entry, frames, box, atol_px: float) -> None:
    """`found_px` (x1, y1, x2, y2 in the processor's `frame` of (w, h) pixels), read as the model's relative box,
    is the toolkit's box for `box` (original pixels) to within `atol_px`, and maps back onto `box`."""
    top = 1000.0 if entry.box_format.scale == "norm1000" else 1.0
    (w, h), (x1, y1, x2, y2) = frame, found_px
    found = [x1 / w * top, y1 / h * top, x2 / w * top, y2 / h * top]
    expected = to_model_convention(box, entry.box_format, frames.image_size, frames.content_size, frames.sent_size,
                                   frames.content_offset)
    if entry.box_format.order == "yxyx":
        found = [found[1], found[0], found[3], found[2]]
        expected = [expected[1], expected[0], expected[3], expected[2]]  # x-first, to compare with found_px
    expected_px = [expected[0] / top * w, expected[1] / top * h, expected[2] / top * w, expected[3] / top * h]
    assert np.allclose(found_px, expected_px, atol=atol_px), (found_px, expected_px)
    back = to_original_pixels(found, entry.box_format, frames.image_size, frames.sent_size, frames.content_size,
                              frames.content_offset)
    assert iou(back, box) >= 0.95, (back, box)


def prepared(entry, size: tuple[int, int], box: tuple[int, int, int, int]):
    """The runner's image for `entry` of a `size` picture with a white `box`, and its pixels as an (H, W, 3) array."""
    image = prepare_image(picture(size, box), entry)
    return image, np.asarray(Image.open(io.BytesIO(image.data)).convert("RGB"))


@pytest.mark.parametrize("model", ["google/gemma-3-4b-it", "google/medgemma-4b-it", "google/medgemma-1.5-4b-it"])
@pytest.mark.parametrize(("size", "box"), [((640, 480), (100, 60, 300, 200)), ((300, 1200), (50, 900, 250, 1150)),
                                           ((1024, 1024), (0, 0, 512, 256))])
def test_gemma3_relative_boxes_land_where_the_toolkit_says(model, size, box):
    entry = REGISTRY.get(model)
    image, _ = prepared(entry, size, box)
    found = bright_box(gemma_pixels(image.data))
    assert_relative_box(found, (896, 896), entry, image.frames, box, atol_px=2.7)  # 3/1000 of the side: resampling


# --- Qwen3-VL ---------------------------------------------------------------------------------------------
# transformers serves qwen3_vl with the Qwen2-VL image processor (models/auto/image_processing_auto.py); the
# patch is 16 with merge 2, "the compression ratio is 32 for Qwen3-VL" (QwenLM/Qwen3-VL@96588727:README.md
# L350-352, L424); max_pixels is what the backend passes the server (the entry's image.max_pixels,
# backends/vllm_offline.engine_kwargs). The rest are the class defaults: the checkpoint's own
# preprocessor_config.json was not read, and relative boxes do not depend on its min_pixels.
QWEN3 = REGISTRY.get("Qwen/Qwen3-VL-8B-Instruct")


def qwen3_processor() -> Qwen2VLImageProcessorPil:
    return Qwen2VLImageProcessorPil(patch_size=16, merge_size=2, max_pixels=QWEN3.image.max_pixels)


@pytest.mark.parametrize("size", SIZES)
def test_qwen3_the_server_resizes_the_sent_image_by_smart_resize_at_factor_32(size):
    processor = qwen3_processor()
    w, h = plan_frames(size, QWEN3).sent_size
    _, grid_h, grid_w = processor(images=np.zeros((h, w, 3), np.uint8))["image_grid_thw"][0]
    assert (int(grid_h) * 16, int(grid_w) * 16) == smart_resize(h, w, 32, processor.size.shortest_edge,
                                                                QWEN3.image.max_pixels)


@pytest.mark.parametrize("model", [e.name for e in REGISTRY.models if e.family == "qwen3_vl"])
@pytest.mark.parametrize(("size", "box"), [((640, 480), (100, 60, 300, 200)), ((4000, 3000), (700, 100, 1400, 800)),
                                           ((401, 37), (10, 5, 200, 30)), ((30, 30), (5, 5, 20, 25))])
def test_qwen3_relative_boxes_land_where_the_toolkit_says(model, size, box):
    """Whatever size the server picks (a 30 x 30 image is enlarged, a 4000 x 3000 one reduced, neither keeps its
    aspect exactly), 0-1000 boxes of the sent image are where the toolkit puts them."""
    entry = REGISTRY.get(model)
    image, _ = prepared(entry, size, box)
    plane = qwen_pixels(image.data, qwen3_processor())
    assert_relative_box(bright_box(plane), (plane.shape[1], plane.shape[0]), entry, image.frames, box, atol_px=1.5)


# --- LLaVA-1.5 ------------------------------------------------------------------------------------------------
LLAVA = REGISTRY.get("llava-hf/llava-1.5-7b-hf")
LLAVA_CASES = [((640, 480), (100, 60, 300, 200)), ((300, 1200), (50, 900, 250, 1150)),
               ((1500, 840), (700, 100, 1400, 800)), ((30, 30), (5, 5, 20, 25))]


def llava_pixels(pixels: np.ndarray) -> np.ndarray:
    """What the LLaVA-1.5 processor makes of an (H, W, 3) image: (3, 336, 336), normalised."""
    processor = CLIPImageProcessorPil(**processor_config("llava_1_5_preprocessor_config.json"))
    return np.asarray(processor(images=pixels)["pixel_values"])[0]


@pytest.mark.parametrize(("size", "box"), LLAVA_CASES)
def test_llava15_relative_boxes_of_the_padded_square_land_where_the_toolkit_says(size, box):
    image, pixels = prepared(LLAVA, size, box)
    plane = llava_pixels(pixels).mean(axis=0)
    assert plane.shape == (336, 336)
    assert_relative_box(bright_box(plane), (336, 336), LLAVA, image.frames, box, atol_px=1.5)


@pytest.mark.parametrize(("size", "box"), LLAVA_CASES[:3])
def test_llava15_the_padding_is_the_clip_mean_the_model_was_trained_on(size, box):
    """The pad bands reach the processor whole, each pixel the normalised CLIP mean as LLaVA's expand2square
    wrote it (int(mean x 255) per channel): the crop removes none of the square."""
    image, pixels = prepared(LLAVA, size, box)
    out = llava_pixels(pixels)
    config = processor_config("llava_1_5_preprocessor_config.json")
    mean, std = np.asarray(config["image_mean"]), np.asarray(config["image_std"])
    fill = (np.floor(mean * 255) / 255 - mean) / std
    assert tuple(int(v) for v in np.floor(mean * 255)) == tuple(LLAVA.image.square_pad.fill)
    ox, oy = image.frames.content_offset
    side = image.frames.sent_size[0]
    band = int(max(ox, oy) * 336 / side) - 2  # the pad band's width in the processor's pixels, less resampling
    edge = out[:, :band, :] if oy else out[:, :, :band]
    assert band > 0 and np.allclose(edge, fill[:, None, None], atol=1e-6)


def test_llava15_an_unpadded_image_would_lose_its_sides_to_the_processors_crop():
    """Why the registry pads: sent as it is, a wide image is centre-cropped to its middle square, and a box at
    its left edge never reaches the model."""
    unpadded = LLAVA.model_copy(update={"image": ImageLimits(max_side=672)})
    _, pixels = prepared(unpadded, (1200, 400), (20, 100, 200, 300))
    out = llava_pixels(pixels).mean(axis=0)
    _, padded = prepared(LLAVA, (1200, 400), (20, 100, 200, 300))
    assert out.max() < out.min() + 1e-6                                    # all background: the box was cut off
    assert llava_pixels(padded).mean(axis=0).max() > 1.5                    # padded, the white box is there


# --- InternVL3.5 ----------------------------------------------------------------------------------------------
# The transformers-native InternVL checkpoints' image processor as transformers' converter writes it
# (huggingface/transformers@015d3b273cbc4a72f2feb1da386896655a23b3da:
# src/transformers/models/internvl/convert_internvl_weights_to_hf.py write_image_processor: Got-OCR2's processor,
# 448 x 448, ImageNet mean and std), with the class defaults min_patches 1 and max_patches 12; InternVLProcessor
# always calls it with crop_to_patches=True (models/internvl/processing_internvl.py images_kwargs).
INTERNVL = REGISTRY.get("OpenGVLab/InternVL3_5-8B")
TILE = 448
INTERNVL_CASES = [((640, 480), (100, 60, 300, 200)), ((4000, 3000), (700, 100, 1400, 800)),
                  ((3000, 900), (2000, 100, 2900, 800)), ((897, 3000), (10, 10, 800, 2000)), ((30, 30), (5, 5, 20, 25))]


def internvl_tiles(pixels: np.ndarray) -> tuple[np.ndarray, int]:
    processor = GotOcr2ImageProcessorPil(size={"height": TILE, "width": TILE}, image_mean=[0.485, 0.456, 0.406],
                                         image_std=[0.229, 0.224, 0.225])
    out = processor(images=pixels, crop_to_patches=True)
    return np.asarray(out["pixel_values"]).mean(axis=1), int(out["num_patches"][0])


@pytest.mark.parametrize(("size", "box"), INTERNVL_CASES)
def test_internvl_tiles_the_sent_image_as_it_would_the_original(size, box):
    """The runner's downscale to image.max_pixels (12 tiles of 448 x 448) leaves the tile grid the model sees
    as the original's would be."""
    image, pixels = prepared(INTERNVL, size, box)
    sent_w, sent_h = image.frames.sent_size
    grid = get_optimal_tiled_canvas((sent_h, sent_w), (TILE, TILE), 1, 12)
    assert grid == get_optimal_tiled_canvas((size[1], size[0]), (TILE, TILE), 1, 12)
    _, count = internvl_tiles(pixels)
    assert count == grid[0] * grid[1] + (grid[0] * grid[1] > 1)  # the tiles, and a thumbnail when there are several


@pytest.mark.parametrize(("size", "box"), INTERNVL_CASES)
def test_internvl_relative_boxes_land_where_the_toolkit_says(size, box):
    """In the tiles put back together and in the thumbnail, a 0-1000 box of the original is where the toolkit
    puts it, though neither keeps the image's aspect exactly."""
    image, pixels = prepared(INTERNVL, size, box)
    tiles, count = internvl_tiles(pixels)
    cols, rows = get_optimal_tiled_canvas((pixels.shape[0], pixels.shape[1]), (TILE, TILE), 1, 12)
    grid = tiles[:cols * rows].reshape(rows, cols, TILE, TILE)
    stitched = grid.transpose(0, 2, 1, 3).reshape(rows * TILE, cols * TILE)  # tiles come row by row
    assert_relative_box(bright_box(stitched), (cols * TILE, rows * TILE), INTERNVL, image.frames, box, atol_px=1.5)
    if count > 1:
        assert_relative_box(bright_box(tiles[-1]), (TILE, TILE), INTERNVL, image.frames, box, atol_px=1.5)
