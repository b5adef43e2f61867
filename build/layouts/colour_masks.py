"""RGB masks whose colours are classes (BUS-UCLM: green benign lesion, red malignant lesion), turned into the
label masks every later step reads: value i is the i-th colour of the manifest's `mask_colors`, 0 the
background. The layout stores the result in its cache, so downstream nothing knows colours existed.

A lossless mask (PNG, TIFF) is matched exactly: a pixel of a colour the manifest does not declare is
either an exclusion of the mask (`other_colors: exclude`, the default: an incomplete colour map must
not silently lose a class) or background (`other_colors: background`, for anti-aliased outlines), and
the count is recorded either way. A lossy (JPEG) mask has no exact colours: each pixel takes the nearest
declared colour and every class loses the structures thinner than three pixels, as `mask_files` does for
grey JPEG masks, so compression ringing along an edge never becomes specks of another class.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image

from mmbu.build.layouts.masks import MaskError

RGB = tuple[int, int, int]
SHOWN_COLOURS = 3  # undeclared colours named in a message


def read_rgb(path: Path) -> tuple[np.ndarray, bool]:
    """(H, W, 3) uint8 colours of a mask file and whether its format is lossy (JPEG)."""
    try:
        with Image.open(path) as image:
            lossy = image.format == "JPEG"
            rgb = np.asarray(image.convert("RGB"))  # palette and grey masks become their colours
    except Exception as exc:  # noqa: BLE001 - Pillow raises several types; the sentence names the file
        raise MaskError(f"{path.name}: the colour mask cannot be read ({exc})") from None
    return rgb, lossy


def colour_objects(rgb: np.ndarray, background: RGB, *, lossy: bool, name: str) -> tuple[np.ndarray, str]:
    """A mask whose colours only tell objects apart (BBBC039 gives touching nuclei different colours): value i + 1
    for the i-th colour found, 0 for the background colour; each value's connected pieces are the objects."""
    if lossy:
        raise MaskError(f"{name}: a JPEG mask blends neighbouring colours, so its colours cannot separate objects")
    packed = _pack(rgb)
    colours, values = np.unique(packed, return_inverse=True)
    values = values.reshape(packed.shape) + 1
    values[packed == _pack_one(background)] = 0
    return values.astype(np.uint32), f"{len(colours) - int((colours == _pack_one(background)).any())} object colours"


def colour_values(rgb: np.ndarray, colours: list[RGB], background: RGB, *, lossy: bool,
                  other_is_background: bool) -> tuple[np.ndarray, str]:
    """The label mask (0 background, i + 1 for `colours[i]`) of an RGB mask, and a provenance note."""
    if lossy:
        return _snap(rgb, colours, background)
    packed = _pack(rgb)
    values = np.zeros(packed.shape, np.uint16)
    known = packed == _pack_one(background)
    for value, colour in enumerate(colours, start=1):
        where = packed == _pack_one(colour)
        values[where] = value
        known |= where
    if known.all():
        return values, "colours matched exactly"
    stray, counts = np.unique(packed[~known], return_counts=True)
    order = np.argsort(-counts, kind="stable")[:SHOWN_COLOURS]
    shown = ", ".join(f"{_unpack(int(stray[i]))} ({int(counts[i])} px)" for i in order)
    more = f" and {len(stray) - SHOWN_COLOURS} more" if len(stray) > SHOWN_COLOURS else ""
    total = int(counts.sum())
    if not other_is_background:
        raise MaskError(f"{total} pixels have colours mask_colors does not name: {shown}{more}; add them to "
                        "mask_colors, or set other_colors: background")
    return values, f"colours matched exactly; {total} pixels of other colours left as background: {shown}{more}"


def _snap(rgb: np.ndarray, colours: list[RGB], background: RGB) -> tuple[np.ndarray, str]:
    from scipy import ndimage  # here: a no-op rebuild never loads scipy
    pixels = rgb.astype(np.int32)
    best = np.full(rgb.shape[:2], np.iinfo(np.int32).max, np.int32)
    nearest = np.zeros(rgb.shape[:2], np.int32)
    for value, colour in enumerate([background, *colours]):  # one colour at a time: one image's memory
        distance = ((pixels - np.array(colour, np.int32)) ** 2).sum(axis=-1)
        closer = distance < best
        best[closer], nearest[closer] = distance[closer], value
    values = np.zeros(nearest.shape, np.uint16)
    for value in range(1, len(colours) + 1):
        values[ndimage.binary_opening(nearest == value, structure=np.ones((3, 3), bool))] = value
    return values, ("lossy colour mask: each pixel took the nearest of the declared colours, structures "
                    "thinner than 3 pixels removed")


def _pack(rgb: np.ndarray) -> np.ndarray:
    rgb = rgb.astype(np.uint32)
    return (rgb[..., 0] << 16) | (rgb[..., 1] << 8) | rgb[..., 2]


def _pack_one(colour: RGB) -> int:
    return (colour[0] << 16) | (colour[1] << 8) | colour[2]


def _unpack(packed: int) -> RGB:
    return (packed >> 16) & 255, (packed >> 8) & 255, packed & 255
