"""How a region of interest is drawn on an image: the evaluation draws it for the model (`benchmark_eval.tasks.images`)
and the build's review sheet draws it for a person (`build.release.preview`), so both show the same pixels.

A 3-pixel pure-green (0, 255, 0) outline just *outside* the region: a rectangle around each box, the contour around
a mask; the region's own pixels are never painted over. Only a region covering the whole image, which leaves no
pixel outside it, is outlined just inside, on the image's edge.
"""
from __future__ import annotations

import math

import numpy as np
from PIL import Image, ImageDraw

ROI_COLOUR = (0, 255, 0)
ROI_COLOUR_NAME = "green"
ROI_LINE_WIDTH = 3


def draw_boxes(image: Image.Image, boxes: list[tuple[float, float, float, float]]) -> Image.Image:
    """A copy with a green outline just outside each box (boxes in `image` pixels, x2/y2 exclusive; give them as
    Fractions when scaled, so an edge on a pixel edge is not moved a pixel out by rounding)."""
    out = image.copy()
    draw = ImageDraw.Draw(out)
    width, height = image.size
    for x1, y1, x2, y2 in boxes:
        x1, y1 = math.floor(x1), math.floor(y1)
        x2, y2 = math.ceil(x2), math.ceil(y2)
        if x1 <= 0 and y1 <= 0 and x2 >= width and y2 >= height:
            # a box over the whole image leaves no pixel outside it: its outline goes just inside, on the image's
            # edge, rather than nowhere under a question that names it
            draw.rectangle([0, 0, width - 1, height - 1], outline=ROI_COLOUR, width=ROI_LINE_WIDTH)
            continue
        draw.rectangle([x1 - ROI_LINE_WIDTH, y1 - ROI_LINE_WIDTH, x2 - 1 + ROI_LINE_WIDTH, y2 - 1 + ROI_LINE_WIDTH],
                       outline=ROI_COLOUR, width=ROI_LINE_WIDTH)
    return out


def mask_region(mask: Image.Image, size: tuple[int, int]) -> np.ndarray:
    """The region of an L `mask` (pixels above 0) on the image resized to `size` (w, h): every resized pixel
    whose footprint holds any part of it, as a box's edges are floored and ceiled. NEAREST sampling dropped what
    fell between its samples (a 2x2 region of a 4000x3000 image sent at 672 px vanished) and left pixels partly
    inside the region outside it, for the ring to paint over. Only the region's bounding box is read."""
    region = np.zeros((size[1], size[0]), bool)
    bbox = mask.getbbox()
    if bbox is None:
        return region
    xs, x_first, x_last = _footprints(bbox[0], bbox[2], mask.size[0], size[0])
    ys, y_first, y_last = _footprints(bbox[1], bbox[3], mask.size[1], size[1])
    crop = np.asarray(mask.crop((x_first[0], y_first[0], x_last[-1] + 1, y_last[-1] + 1))) > 0
    for axis, first, last in ((1, x_first - x_first[0], x_last - x_first[0]),
                              (0, y_first - y_first[0], y_last - y_first[0])):
        # reduceat covers first[i] .. first[i + 1] - 1 (just first[i] when they are equal); `last` adds the
        # source pixel that resized pixel i shares with pixel i + 1
        crop = np.logical_or.reduceat(crop, first, axis=axis) | crop.take(last, axis=axis)
    region[ys[0]:ys[-1] + 1, xs[0]:xs[-1] + 1] = crop
    return region


def _footprints(start: int, stop: int, n: int, target: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Along one axis of n source pixels resized to `target`: the resized pixels overlapping source pixels
    start .. stop - 1, and the first and last source pixel under each of them."""
    resized = np.arange(start * target // n, -(-stop * target // n), dtype=np.int64)
    return resized, resized * n // target, -(-(resized + 1) * n // target) - 1


def draw_mask_outline(image: Image.Image, region: np.ndarray) -> Image.Image:
    """A copy with a green ring of ROI_LINE_WIDTH pixels around `region` (a boolean array of the image's size)."""
    if region.shape != (image.size[1], image.size[0]):
        raise ValueError(f"the mask is {region.shape[1]}x{region.shape[0]} but the image is "
                         f"{image.size[0]}x{image.size[1]}")
    from scipy import ndimage  # here, not at import: ~0.15 s that only mask-grounded rows need (and every eval worker paid)

    ring = ndimage.binary_dilation(region, iterations=ROI_LINE_WIDTH) & ~region
    if not ring.any():  # the region is the whole image: outlined just inside, on the image's edge, not nowhere
        ring = region & ~ndimage.binary_erosion(region, iterations=ROI_LINE_WIDTH, border_value=0)
    pixels = np.array(image)
    pixels[ring] = ROI_COLOUR
    return Image.fromarray(pixels, "RGB")
