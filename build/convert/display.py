"""Display steps shared by every converter: pure functions over numpy arrays, no files.

Conventions the callers rely on:
- Windows are `(lo, hi)` bounds in the input's value units; `window_to_uint8` maps `lo` to 0 and `hi`
  to 255 linearly (clipping outside), NaN to 0, +Inf to 255 and -Inf to 0.
- A degenerate window (`hi <= lo`, e.g. a constant image) is a threshold: values above `lo` become 255,
  the rest 0 — so a constant image is black and never divides by zero.
- Masks are never windowed or interpolated: `to_label_image` keeps their values and
  `resize_longest_side(..., is_mask=True)` / `resize_to(..., is_mask=True)` sample with nearest
  neighbour onto exactly the same output grid as the image, so an image and its mask stay aligned.
- Non-square pixels are made square by enlarging the coarser axis (`square_pixel_size`), never by
  shrinking the finer one.
"""
from __future__ import annotations

import numpy as np
from PIL import Image

from mmbu.build.convert.base import ConversionError

DEFAULT_LOW_PERCENTILE = 0.5
DEFAULT_HIGH_PERCENTILE = 99.5
# pixels whose height and width differ by at most this fraction count as square (rounding in headers)
SQUARE_PIXEL_TOLERANCE = 0.01
# one axis is stretched at most this much to make pixels square (guards absurd headers)
MAX_ASPECT_STRETCH = 16


def percentile_window(
    values: np.ndarray,
    low: float = DEFAULT_LOW_PERCENTILE,
    high: float = DEFAULT_HIGH_PERCENTILE,
    ignore: float | np.ndarray | None = None,
) -> tuple[float, float]:
    """Robust display bounds: the `low`/`high` percentiles of the finite values.

    `ignore` is either a value to leave out (e.g. 0 for background outside the body) or a boolean
    mask of the same shape marking pixels to leave out. NaN and ±Inf never take part. When the
    percentiles coincide (mostly-constant images, sparse bright spots) the full finite range is used
    instead so that the few informative pixels are not lost; a constant image gives `lo == hi`.
    With no usable value at all the window is `(0.0, 0.0)`. `robust_window` also says which case applied.
    """
    lo, hi, _source = robust_window(values, low, high, ignore)
    return lo, hi


def robust_window(
    values: np.ndarray,
    low: float = DEFAULT_LOW_PERCENTILE,
    high: float = DEFAULT_HIGH_PERCENTILE,
    ignore: float | np.ndarray | None = None,
) -> tuple[float, float, str]:
    """`percentile_window` plus the `source` to record: the percentiles, or the min-max fallback."""
    data = np.asarray(values)
    keep = np.isfinite(data) if np.issubdtype(data.dtype, np.floating) else np.ones(data.shape, bool)
    if ignore is not None:
        if isinstance(ignore, np.ndarray) and ignore.dtype == bool:
            keep &= ~ignore
        else:
            keep &= data != ignore
    usable = data[keep]
    percentiles = f"percentile {low:g}-{high:g}"
    if usable.size == 0:
        return 0.0, 0.0, f"{percentiles}: no usable value"
    lo, hi = (float(v) for v in np.percentile(usable, [low, high]))
    if hi <= lo:
        return float(usable.min()), float(usable.max()), f"min-max ({percentiles} coincide)"
    return lo, hi, percentiles


def window_to_uint8(values: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """Map `[lo, hi]` linearly onto 0..255 (clipped), NaN-safe; see the module docstring for edge cases."""
    data = np.asarray(values)
    if hi <= lo:
        return np.where(data > lo, 255, 0).astype(np.uint8)  # NaN > lo is False -> 0
    # in place on one float64 buffer: these arrays can be tens of megapixels
    scaled = np.subtract(data, lo, dtype=np.float64)
    scaled *= 255.0 / (hi - lo)
    np.clip(scaled, 0.0, 255.0, out=scaled)  # also sends +Inf to 255 and -Inf to 0
    np.rint(scaled, out=scaled)
    if np.issubdtype(data.dtype, np.floating):
        scaled[np.isnan(scaled)] = 0.0
    return scaled.astype(np.uint8)


def center_width_to_bounds(center: float, width: float) -> tuple[float, float]:
    """A (center, width) window, as users and DICOM headers give it, to `(lo, hi)` display bounds.

    This is the DICOM LINEAR window (PS3.3 C.11.2.1.2.1): values at or below
    `center - 0.5 - (width - 1) / 2` are black, above `center - 0.5 + (width - 1) / 2` white.
    DICOM requires width >= 1; a smaller width (common for float data such as NIfTI) falls back to
    the plain `center ± width / 2`.
    """
    if width <= 0:
        raise ValueError(f"window width must be positive, got {width}")
    if width < 1:
        return center - width / 2.0, center + width / 2.0
    return center - 0.5 - (width - 1) / 2.0, center - 0.5 + (width - 1) / 2.0


def invert(pixels: np.ndarray) -> np.ndarray:
    """Invert 8-bit display pixels (MONOCHROME1 / INVERSE after windowing): 0 ↔ 255."""
    if pixels.dtype != np.uint8:
        raise TypeError(f"invert works on 8-bit display pixels, got {pixels.dtype}")
    return np.subtract(255, pixels, dtype=np.uint8)


def output_size(height: int, width: int, max_size: int | None) -> tuple[int, int]:
    """The (height, width) after fitting the longest side into `max_size`, aspect kept (≥ 1 pixel)."""
    longest = max(height, width)
    if max_size is None or longest <= max_size:
        return height, width
    if max_size < 1:
        raise ValueError(f"max_size must be at least 1, got {max_size}")
    scale = max_size / longest
    return max(1, round(height * scale)), max(1, round(width * scale))


def resize_longest_side(pixels: np.ndarray, max_size: int | None, is_mask: bool) -> np.ndarray:
    """Shrink so the longest side is at most `max_size` (never enlarges).

    Images (uint8 L or RGB) use Pillow's LANCZOS; masks use NEAREST so no new label value appears.
    An image and its mask of the same shape land on the same output grid.
    """
    height, width = pixels.shape[:2]
    new_height, new_width = output_size(height, width, max_size)
    if (new_height, new_width) == (height, width):
        return pixels
    return resize_to(pixels, new_height, new_width, is_mask)


def resize_to(pixels: np.ndarray, height: int, width: int, is_mask: bool) -> np.ndarray:
    """Resample to exactly (height, width): LANCZOS for 8-bit L/RGB images, NEAREST for masks.

    Both filters map pixel centres the same way, so an image and its mask resized to the same size
    stay aligned pixel for pixel.
    """
    if is_mask:
        return _resize_labels(pixels, (width, height))
    if pixels.dtype != np.uint8 or pixels.ndim not in (2, 3):
        raise TypeError(f"images are resized as 8-bit L or RGB, got {pixels.dtype} with shape {pixels.shape}")
    return np.asarray(Image.fromarray(pixels).resize((width, height), Image.Resampling.LANCZOS))


def square_pixel_size(
    height: int, width: int, row_spacing: float, column_spacing: float,
    tolerance: float = SQUARE_PIXEL_TOLERANCE, max_stretch: float = MAX_ASPECT_STRETCH,
) -> tuple[int, int] | None:
    """The (height, width) at which pixels of the given physical size become square, or None.

    `row_spacing` is a pixel's height (the distance between rows), `column_spacing` its width; only
    their ratio matters (mm, or the two values of a pixel aspect ratio). The axis with the larger
    spacing is enlarged to the finer one, the other kept: nothing is shrunk, so no detail is lost.
    None when the pixels are square within `tolerance` (header rounding). A ratio beyond
    `max_stretch` is a `ValueError` (an implausible header, not a pixel shape to honour).
    """
    if not (row_spacing > 0 and column_spacing > 0):
        raise ValueError(f"pixel spacing must be positive, got {row_spacing:g} by {column_spacing:g}")
    finest, coarsest = sorted((row_spacing, column_spacing))
    if coarsest / finest - 1 <= tolerance:
        return None
    if coarsest / finest > max_stretch:
        raise ValueError(f"a pixel {coarsest / finest:.3g} times taller than wide (or wider than tall) exceeds the "
                         f"plausible {max_stretch:g}")
    return max(1, round(height * row_spacing / finest)), max(1, round(width * column_spacing / finest))


def _resize_labels(labels: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    if labels.ndim != 2:
        raise TypeError(f"a mask must be 2-D, got shape {labels.shape}")
    source_dtype = labels.dtype
    if source_dtype == bool or source_dtype == np.uint8:
        image = Image.fromarray(labels.astype(np.uint8))
    elif np.issubdtype(source_dtype, np.integer):
        if labels.size and (labels.min() < np.iinfo(np.int32).min or labels.max() > np.iinfo(np.int32).max):
            raise ConversionError("the mask holds label values outside the 32-bit range and cannot be resized")
        image = Image.fromarray(labels.astype(np.int32))  # mode "I"
    else:
        image = Image.fromarray(labels.astype(np.float32))  # mode "F"; nearest keeps the values exactly
    resized = np.asarray(image.resize(size, Image.Resampling.NEAREST))
    return resized.astype(source_dtype)


def to_label_image(values: np.ndarray) -> np.ndarray:
    """A mask as an 8-bit label image with its values unchanged (0 background, 1..255 labels).

    Booleans become 0/1. Floats are accepted only when every value is a whole number (masks often
    arrive as float NIfTI). Anything that would need rescaling — negative labels, labels above 255,
    fractional or NaN values — is a `ConversionError`, because silently rescaling a mask would
    change what its labels mean.
    """
    data = np.asarray(values)
    if data.dtype == bool:
        return data.astype(np.uint8)
    if np.issubdtype(data.dtype, np.floating):
        if not np.all(np.isfinite(data)):
            raise ConversionError("the mask holds NaN or infinite values, so it is not a label image")
        if not np.all(data == np.round(data)):
            raise ConversionError("the mask holds fractional values, so it is not a label image")
    elif not np.issubdtype(data.dtype, np.integer):
        raise ConversionError(f"the mask has data type {data.dtype}, not integer labels")
    if data.size == 0:
        return data.astype(np.uint8)
    low, high = data.min(), data.max()
    if low < 0 or high > 255:
        raise ConversionError(
            f"the mask holds label values from {low:g} to {high:g}; an 8-bit PNG mask keeps labels 0..255 only"
        )
    return data.astype(np.uint8)


def composite_on_background(rgba: np.ndarray, background: tuple[int, int, int] = (255, 255, 255)) -> np.ndarray:
    """Blend an (H, W, 4) uint8 RGBA array onto a solid background colour; returns (H, W, 3) uint8.

    Used for transparent raster images (onto white) and for slide regions outside the scanned area
    (onto the slide's background colour).
    """
    if rgba.ndim != 3 or rgba.shape[2] != 4:
        raise TypeError(f"expected an (H, W, 4) RGBA array, got shape {rgba.shape}")
    colour = rgba[..., :3].astype(np.float64)
    alpha = rgba[..., 3:4].astype(np.float64) / 255.0
    backdrop = np.asarray(background, dtype=np.float64)
    blended = colour * alpha + backdrop * (1.0 - alpha)
    return np.clip(np.rint(blended), 0, 255).astype(np.uint8)


def grey_to_uint8(values: np.ndarray, center_width: tuple[float, float] | None = None) -> tuple[np.ndarray, dict]:
    """Window a grayscale array to 8 bits: the user's (center, width), else the robust percentile window.

    Returns the pixels and the `window` record for the report's params:
    `{"lo", "hi", "source"}` plus `center`/`width` when the user gave them.
    """
    if center_width is None:
        lo, hi, source = robust_window(values)
        record = {"lo": lo, "hi": hi, "source": source}
    else:
        center, width = center_width
        lo, hi = center_width_to_bounds(center, width)
        record = {"center": center, "width": width, "lo": lo, "hi": hi, "source": "user"}
    return window_to_uint8(values, lo, hi), record
