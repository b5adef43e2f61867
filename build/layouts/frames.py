"""From the source pixel frame to the converted PNG's frame.

Converters may shrink an image (WSI `max_size`, pyramid levels). Boxes found by a layout are in the
source frame (level 0 for slides), so before release they are scaled by the ratio of the output size
to the source size recorded for the conversion. Masks go through a nearest-neighbour resize, which
keeps label values intact. NIfTI reorientation is not a scaling: volume masks are converted by the
converter itself (`as_mask`) and their regions read from the converted slice.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from PIL import Image

from mmbu.core.boxes import Box, PixelBox


@dataclass(frozen=True)
class FrameMap:
    """Scale factors from the source frame to the output frame (output = source * scale)."""

    source_size: tuple[int, int]
    output_size: tuple[int, int]

    @property
    def scale(self) -> tuple[float, float]:
        return (self.output_size[0] / self.source_size[0], self.output_size[1] / self.source_size[1])


# params keys (in order of trust) naming the full-resolution source frame as [width, height]:
# an explicit source_size; level 0 of a slide (mmbu.build.convert.wsi); the size before a max_size
# resize (mmbu.build.convert.dispatch)
SOURCE_SIZE_KEYS = ("source_size", "level0_dimensions", "resized_from")


def frame_map_from_record(record: Mapping[str, Any], source_size: tuple[int, int] | None = None) -> FrameMap:
    """The map for one conversion-report line (DESIGN §3.2).

    The output size is the record's `width`/`height`; the source size comes from the first of
    `SOURCE_SIZE_KEYS` recorded in `params`, else `source_size` (e.g. `Sample.image_size`). With
    neither, the conversion kept the size.
    """
    output = (int(record["width"]), int(record["height"]))
    params = record.get("params") or {}
    recorded = next((params[k] for k in SOURCE_SIZE_KEYS if params.get(k) and all(int(v) > 0 for v in params[k])),
                    None)
    source = tuple(int(v) for v in recorded) if recorded else source_size
    return FrameMap(source_size=tuple(source) if source else output, output_size=output)


def map_boxes(boxes: Iterable[Box], frame: FrameMap) -> list[PixelBox]:
    """Source-frame pixel-edge boxes in the output frame, snapped outwards to whole pixels and clipped."""
    sx, sy = frame.scale
    width, height = frame.output_size
    mapped = []
    for x1, y1, x2, y2 in boxes:
        # A tiny epsilon keeps exact edges (e.g. 10.0000001 after scaling) from growing by a pixel.
        nx1 = max(0, math.floor(x1 * sx + 1e-6))
        ny1 = max(0, math.floor(y1 * sy + 1e-6))
        nx2 = min(width, max(nx1 + 1, math.ceil(x2 * sx - 1e-6)))
        ny2 = min(height, max(ny1 + 1, math.ceil(y2 * sy - 1e-6)))
        mapped.append((nx1, ny1, nx2, ny2))
    return mapped


def map_mask(mask: np.ndarray, frame: FrameMap) -> np.ndarray:
    """A label or boolean mask resized to the output frame with nearest-neighbour sampling (values kept)."""
    if tuple(frame.output_size) == (mask.shape[1], mask.shape[0]):
        return mask
    was_bool = mask.dtype == bool
    source = mask.astype(np.uint8) if was_bool else mask
    if source.dtype not in (np.uint8, np.int32, np.float32):
        source = source.astype(np.int32)
    resized = np.asarray(Image.fromarray(source).resize(frame.output_size, Image.Resampling.NEAREST))
    return resized.astype(bool) if was_bool else resized.astype(mask.dtype)
