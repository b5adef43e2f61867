"""Where an image shows something: its content mask, so that closed detection's wrong boxes lie on the picture and
not on what surrounds it (the black frame of an endoscopy or fundus image, the air around a body, padding, bare
glass around a slide's tissue). A wrong box there is rejected at a glance, whatever the target looks like.

The estimate, on a copy at most `WORKING_SIDE` pixels on its long side:

1. The *frame* is every flat pixel (local standard deviation at most `FLAT_STD`) within `FRAME_TOLERANCE` of the
   commonest flat colour of the image's outer edge, connected to the edge, when that colour is near black or near
   white (`FRAME_DARKEST`, `FRAME_PALEST`). Unless it holds `FRAME_EDGE_SHARE` of
   the edge, the image has no frame (a tissue field, a radiograph filled edge to edge): all of it is content.
   Texture is what tells a frame from a picture's own dark or pale parts: stroma, mucosa and sensor noise on a
   fluorescence field vary from pixel to pixel, a black frame, clipped air and padding do not.
2. The rest, the foreground, is cut into pieces. When the largest piece holds at least `DOMINANT_SHARE` of it, the
   image is one object on a frame (a body in air, a retina or a mucosa in a black frame, tissue on glass): the
   content is that piece and any other at least `MIN_PIECE_SHARE` of its size (not burnt-in text, not the patient
   table), closed with a disc of `CLOSING_SHARE` of the shorter side and with its holes filled (the lungs inside a
   chest are content), as long as that covers `MIN_OBJECT_SHARE` of the image. Otherwise the foreground is a field
   of small objects (nuclei, or a few cells, on a dark fluorescence field) and the field between them is content
   too: all of the image is.

A flat image (no foreground at all) gives no evidence of a frame: all of it is content.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from PIL import Image

WORKING_SIDE = 256
FRAME_TOLERANCE = 12  # grey levels around the frame colour: JPEG noise on a black frame, MR background noise
FLAT_STD = 4.0  # grey levels: a frame's local standard deviation at working size (5 x 5 pixels)
FRAME_EDGE_SHARE = 0.2  # a fundus disc cut by the top and bottom edges leaves about half of the edge black
EDGE_SHARE = 0.02  # the outer edge: this share of the shorter side, at least one pixel
DOMINANT_SHARE = 0.5
MIN_PIECE_SHARE = 0.1
MIN_OBJECT_SHARE = 0.15  # of the image: a body, a retina, a slide's tissue; two cells on a dark field are not one
JOIN_SHARE = 1 / 128  # pieces of one object closer than twice this share of the shorter side are one piece
FRAME_DARKEST = 40  # a frame is black (frames, air, dark padding) up to this grey level, or white (glass, white
FRAME_PALEST = 215  # padding) from this one: a flat mid-grey is a smooth part of the picture (a retina's background)
CLOSING_SHARE = 1 / 16


@dataclass(frozen=True)
class ContentMask:
    """A boolean mask of an image's content at working size, and how to ask it about boxes in image pixels."""

    mask: np.ndarray  # (h, w) at working size
    image_size: tuple[int, int]  # (w, h) of the image the boxes are in
    summed: np.ndarray = field(init=False, repr=False)  # the mask's summed-area table: any box's count in 4 reads

    def __post_init__(self) -> None:
        summed = np.zeros((self.mask.shape[0] + 1, self.mask.shape[1] + 1), np.int64)
        summed[1:, 1:] = self.mask.cumsum(0).cumsum(1)
        object.__setattr__(self, "summed", summed)  # frozen: set once, here

    def shares(self, boxes: np.ndarray) -> np.ndarray:
        """The share of each box (rows of x1, y1, x2, y2 in image pixels) that lies on content: the mask's cells the
        box covers, each counted whole (the mask is coarser than the image; a box is never smaller than one cell)."""
        height, width = self.mask.shape
        sx, sy = width / self.image_size[0], height / self.image_size[1]
        boxes = np.asarray(boxes, float).reshape(-1, 4)
        x1 = np.clip(np.floor(boxes[:, 0] * sx), 0, width - 1).astype(int)
        y1 = np.clip(np.floor(boxes[:, 1] * sy), 0, height - 1).astype(int)
        x2 = np.clip(np.ceil(boxes[:, 2] * sx), x1 + 1, width).astype(int)
        y2 = np.clip(np.ceil(boxes[:, 3] * sy), y1 + 1, height).astype(int)
        summed = self.summed
        inside = summed[y2, x2] - summed[y1, x2] - summed[y2, x1] + summed[y1, x1]
        return inside / ((x2 - x1) * (y2 - y1))

    @property
    def share(self) -> float:
        """The share of the whole image that is content."""
        return float(self.mask.mean())


def working_pixels(image: Image.Image) -> np.ndarray:
    """The image as (h, w, channels) float32 at most WORKING_SIDE on its long side, 16-bit grey scaled to 0-255."""
    if image.mode.startswith("I;16") or image.mode in ("I", "F"):
        values = np.asarray(image, np.float32)
        top = float(values.max()) or 1.0
        image = Image.fromarray((values * (255.0 / top)).clip(0, 255).astype(np.uint8), "L")
    elif image.mode not in ("L", "RGB"):
        image = image.convert("RGB")
    scale = WORKING_SIDE / max(image.size)
    if scale < 1:
        image = image.resize((max(1, round(image.width * scale)), max(1, round(image.height * scale))),
                             Image.Resampling.BOX)
    pixels = np.asarray(image, np.float32)
    return pixels[..., None] if pixels.ndim == 2 else pixels


def content_mask(image: Image.Image) -> ContentMask:
    """The content of `image` (see the module's description)."""
    from scipy import ndimage  # ~0.15 s of import only detection rows need

    pixels = ndimage.median_filter(working_pixels(image), size=(3, 3, 1))  # salt noise and JPEG ringing
    height, width = pixels.shape[:2]
    everything = ContentMask(np.ones((height, width), bool), image.size)
    frame = _frame(pixels)
    if frame is None or frame.all():
        return everything
    shorter = min(height, width)
    foreground = _closed(~frame, max(1, round(JOIN_SHARE * shorter)))
    pieces, count = ndimage.label(foreground, structure=np.ones((3, 3)))
    sizes = np.bincount(pieces.ravel())[1:]
    if count == 0 or sizes.max() < DOMINANT_SHARE * sizes.sum():
        return everything
    kept = np.isin(pieces, np.flatnonzero(sizes >= MIN_PIECE_SHARE * sizes.max()) + 1)
    content = ndimage.binary_fill_holes(_closed(kept, max(1, round(CLOSING_SHARE * shorter))))
    return ContentMask(content, image.size) if content.mean() >= MIN_OBJECT_SHARE else everything


def _frame(pixels: np.ndarray) -> np.ndarray | None:
    """The frame's pixels (see the module's description), or None when the image has none."""
    from scipy import ndimage

    height, width = pixels.shape[:2]
    grey = pixels.mean(axis=2)
    mean = ndimage.uniform_filter(grey, 5)
    flat = np.sqrt(np.maximum(ndimage.uniform_filter(grey * grey, 5) - mean * mean, 0)) <= FLAT_STD
    ring = max(1, round(EDGE_SHARE * min(height, width)))
    edge = np.zeros((height, width), bool)
    edge[:ring], edge[-ring:], edge[:, :ring], edge[:, -ring:] = True, True, True, True
    candidates = pixels[edge & flat]
    if len(candidates) < FRAME_EDGE_SHARE * edge.sum():
        return None
    binned = np.floor(candidates / FRAME_TOLERANCE)
    bins, counts = np.unique(binned, axis=0, return_counts=True)
    colour = candidates[np.all(binned == bins[counts.argmax()], axis=1)].mean(axis=0)
    if FRAME_DARKEST < colour.mean() < FRAME_PALEST:
        return None
    like = flat & (np.abs(pixels - colour).max(axis=2) <= FRAME_TOLERANCE)
    if like[edge].mean() < FRAME_EDGE_SHARE:
        return None
    pieces, _ = ndimage.label(like, structure=np.ones((3, 3)))
    return np.isin(pieces, np.unique(pieces[edge & like]))


def _closed(mask: np.ndarray, radius: int) -> np.ndarray:
    """`mask` closed with a disc, the edge pixels repeated outside it: content that reaches the edge is not eaten and a
    frame band along it is not bridged."""
    from scipy import ndimage

    disc = np.hypot(*np.mgrid[-radius:radius + 1, -radius:radius + 1]) <= radius
    padded = np.pad(mask, 2 * radius, mode="edge")
    closed = ndimage.binary_erosion(ndimage.binary_dilation(padded, disc), disc)
    return closed[2 * radius:-2 * radius, 2 * radius:-2 * radius]


def read_content_mask(path: str | Path) -> ContentMask:
    """The content mask of an image file (the converted PNG a release row embeds)."""
    with Image.open(path) as image:
        image.load()
        return content_mask(image)
