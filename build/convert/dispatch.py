"""One source in, one `Converted` out: sniff the format, call its reader, fit the output size.

Readers are imported lazily from `base.READERS`, so converting a PNG never loads openslide or gdcm.
"""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from mmbu.build.convert.base import READERS, ConversionError, Converted, ConvertOptions, load_function
from mmbu.build.convert.display import resize_longest_side
from mmbu.build.convert.sniff import Identified, identify

Reader = Callable[[Path, ConvertOptions], Converted]


def load_reader(format_name: str) -> Reader:
    """The `read(path, options)` function registered for `format_name` in `base.READERS`."""
    try:
        return load_function(READERS[format_name])
    except KeyError:
        raise ConversionError(f"no reader is registered for the format {format_name!r}") from None


def read_image(path: str | Path, options: ConvertOptions | None = None) -> Converted:
    """Read any supported source as 8-bit display pixels (or label values for masks) plus what was done."""
    return read_identified(identify(path), options)


def read_identified(identified: Identified, options: ConvertOptions | None = None) -> Converted:
    """`read_image` for a source already sniffed (the batch sniffs first to report the format on errors)."""
    options = options or ConvertOptions()
    converted = load_reader(identified.format)(identified.path, options)
    converted.params.setdefault("detected", identified.detail or identified.format)
    check_converted(converted, identified.path, options.as_mask)
    if options.max_size is not None:
        resized = resize_longest_side(converted.pixels, options.max_size, is_mask=options.as_mask)
        if resized is not converted.pixels:
            converted.pixels, converted.png = resized, None  # the source's PNG stream holds the pixels before it
        converted.geometry = converted.geometry.then("resize", (converted.width, converted.height),
                                                     how="nearest" if options.as_mask else "lanczos")
    return converted


def check_converted(converted: Converted, source: Path, as_mask: bool = False) -> None:
    """Enforce the reader contract: uint8, (H, W) or (H, W, 3), masks single-channel, and a geometry that
    ends at the pixels' size; a reader bug must not become a bad PNG or boxes in the wrong place."""
    pixels = converted.pixels
    if as_mask and pixels.ndim != 2:
        raise ConversionError(f"{source} gave {pixels.shape[-1]} channels; a mask must hold one label value per pixel")
    shape_ok = pixels.ndim == 2 or (pixels.ndim == 3 and pixels.shape[2] == 3)
    if pixels.dtype != np.uint8 or not shape_ok or pixels.size == 0:
        raise ConversionError(
            f"the {converted.format} reader returned {pixels.dtype} pixels of shape {pixels.shape} for {source.name}, "
            "not 8-bit grayscale or RGB"
        )
    size = (converted.width, converted.height)
    if converted.geometry is None:
        raise ConversionError(f"the {converted.format} reader returned no geometry for {source.name}, so its boxes "
                              "could not be placed on the PNG")
    if converted.geometry.output_size != size:
        end = converted.geometry.output_size
        raise ConversionError(
            f"the {converted.format} reader returned {size[0]} x {size[1]} pixels for {source.name} but recorded a "
            f"geometry that ends at {end[0]} x {end[1]}; boxes would land in the wrong place"
        )
