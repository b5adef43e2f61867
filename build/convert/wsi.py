"""Whole-slide images (SVS, NDPI, MRXS, generic pyramidal TIFF, DICOM WSI) to a bounded thumbnail.

How a slide becomes an output image with bounded memory, whatever its size:

1. The output's longest side is `options.max_size` or `WSI_DEFAULT_MAX_SIZE` (never enlarged).
2. The pyramid level is openslide's `get_best_level_for_downsample` for the wanted downsample:
   the smallest level that is still at least as large as the output.
3. That level is read in tiles of at most `TILE_SIZE` level pixels (`read_region` takes level-0
   coordinates), each tile is composited onto the slide's background colour
   (`openslide.background-color`, white when absent) and shrunk by the integer part of the
   remaining downsample with an exact box filter (`Image.reduce`) into an intermediate canvas
   at most twice the output size; the canvas is then resized to the output with LANCZOS, over
   the exact box the level spans (`level / factor` canvas pixels: the last column and row of the
   canvas may hold only part of a block).
   Reducing tiles whose sizes are multiples of the factor is seam-free, and peak memory is a
   few tiles plus the canvas — never a full level, so a huge single-level slide stays bounded
   (openslide's own `get_thumbnail` reads the whole level).
4. Tiles are read by `READ_THREADS` threads: openslide decodes with the GIL released.
5. A plain tiled TIFF (openslide vendor `generic-tiff`) whose level must shrink by 2× or more is
   decoded by tifffile + imagecodecs instead (`_wsi_tiff_stream`): the same box reduction,
   bit-identical output, 2–4× less CPU than openslide's region painting. `params["decoder"]`
   says which path ran.

With `options.as_mask` the slide is a label image: the first channel is kept and each output
pixel takes the label of the level pixel nearest its centre (`nearest_samples`, what Pillow's
NEAREST resize of the whole level gives), picked tile by tile with no canvas: the same output
grid the image's box-reduce + LANCZOS fills, so a mask lands where its image does (sampling
each block's first pixel put it (factor - 1) / 2 level pixels down-right).
"""
from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from mmbu.build.convert import display
from mmbu.build.convert._wsi_tiff_stream import reduce_tiled_level
from mmbu.build.convert.base import (
    WSI_DEFAULT_MAX_SIZE,
    ConversionError,
    Converted,
    ConvertOptions,
    exception_summary as _cause,
)
from mmbu.build.convert.sniff import mrxs_in_directory
from mmbu.core.geometry import ConversionGeometry

TILE_SIZE = 1024  # level pixels per side read at once: about 4 MiB of RGBA per tile in flight
MAX_TILE_SIZE = 4096  # largest tile accepted to align reads with the slide's stored tiles
CACHE_BYTES = 32 * 2**20  # stored tiles straddling two reads are decoded once
FAST_PATH_MIN_FACTOR = 2  # below this the level read is small and openslide's path is cheap enough
READ_THREADS = 2
CANVAS_PIXEL_BUDGET = 1 << 28  # 268 MP (768 MiB RGB): only a very large --max-size gets near it


@dataclass(frozen=True)
class ReadPlan:
    """Where and how a slide is read: a pure description, decided before any pixel is decoded."""

    level: int
    level_downsample: float
    level_size: tuple[int, int]  # (width, height) of the level
    reduce_factor: int  # integer shrink applied to each tile
    tile_size: int  # level pixels per tile side, a multiple of reduce_factor
    output_size: tuple[int, int]  # (width, height) of the final image


def read(path: Path, options: ConvertOptions) -> Converted:
    """Convert a whole-slide image to an RGB thumbnail (or a label image with `options.as_mask`)."""
    import openslide  # imported here: loading libopenslide is only worth it for slides

    slide_path = resolve_slide_path(Path(path))
    try:
        slide = openslide.OpenSlide(str(slide_path))
    except openslide.OpenSlideUnsupportedFormatError as exc:
        raise ConversionError(f"{slide_path} is not a slide format openslide can read") from exc
    except (openslide.OpenSlideError, OSError) as exc:
        raise ConversionError(f"{slide_path} cannot be opened as a slide ({_cause(exc)})") from exc
    with slide:
        slide.set_cache(openslide.OpenSlideCache(CACHE_BYTES))
        max_size = options.max_size or WSI_DEFAULT_MAX_SIZE
        level0_size = slide.level_dimensions[0]
        plan = plan_read(
            slide.level_dimensions,
            slide.level_downsamples,
            max_size,
            slide.get_best_level_for_downsample,
            native_tile_sizes(slide.properties),
        )
        _check_canvas_budget(slide_path, plan)
        background = background_colour(slide.properties)
        properties = dict(slide.properties)
        canvas = _read_stored_tiles(slide_path, properties, plan, background, options.as_mask)
        decoder, tiles = "tifffile+imagecodecs", None
        if canvas is None:
            decoder = "openslide"
            try:
                canvas, tiles = _read_level(slide, plan, background, options.as_mask)
            except openslide.OpenSlideError as exc:
                raise ConversionError(
                    f"{slide_path} has unreadable tiles at level {plan.level} ({_cause(exc)})"
                ) from exc
    # a mask is sampled straight onto the output grid; an image's canvas is resized to it
    pixels = display.to_label_image(canvas) if options.as_mask else canvas_to_output(canvas, plan)
    params = _params(slide_path, properties, plan, background, tiles, options.as_mask)
    params["decoder"] = decoder
    geometry = ConversionGeometry.kept(level0_size).then("level", plan.level_size).then(
        "resize", plan.output_size, how=params["resample"])
    return Converted(pixels=pixels, format="wsi", frame=None, params=params, geometry=geometry)


def canvas_to_output(canvas: np.ndarray, plan: ReadPlan) -> np.ndarray:
    """Resize the reduced canvas to the output with LANCZOS.

    The canvas's last column and row hold a partial block when the level is not a multiple of
    the factor: the level spans exactly `level / factor` canvas pixels, not the whole canvas, so
    that box is what is resized (resizing the whole canvas would squeeze the picture by
    level / (canvas × factor)).
    """
    factor = plan.reduce_factor
    level_width, level_height = plan.level_size
    box = (0.0, 0.0, level_width / factor, level_height / factor)
    if plan.output_size == (canvas.shape[1], canvas.shape[0]) and box[2:] == plan.output_size:
        return canvas
    return np.asarray(Image.fromarray(canvas).resize(plan.output_size, Image.Resampling.LANCZOS, box=box))


def resolve_slide_path(path: Path) -> Path:
    """The file to hand to openslide. MRXS: the `.mrxs` file (or a directory holding exactly one),
    which must have its same-named data folder next to it."""
    if path.is_dir():
        slide_file = mrxs_in_directory(path)
        if slide_file is None:
            raise ConversionError(
                f"the directory {path} does not hold exactly one .mrxs file, as a MIRAX slide directory does"
            )
        path = slide_file
    if not path.exists():
        raise ConversionError(f"{path} does not exist")
    if path.suffix.lower() == ".mrxs":
        data_folder = path.with_suffix("")
        if not (data_folder / "Slidedat.ini").is_file():
            raise ConversionError(
                f"the MIRAX slide {path.name} has no data folder {data_folder.name}/ with a Slidedat.ini next to it"
            )
    return path


def plan_read(
    level_dimensions: tuple[tuple[int, int], ...],
    level_downsamples: tuple[float, ...],
    max_size: int,
    best_level_for_downsample,
    native_tile: dict[int, tuple[int, int]] | None = None,
) -> ReadPlan:
    """Choose the level (smallest one still at least the output size), tile size and shrink factor.

    Tiles are a multiple of the shrink factor (seam-free box reduction) and, when the slide
    reports its own tile size for the level, of that too, so no stored tile is decoded twice.
    """
    base_width, base_height = level_dimensions[0]
    height, width = display.output_size(base_height, base_width, max_size)
    wanted = max(base_width / width, base_height / height)
    level = int(best_level_for_downsample(wanted))
    level_width, level_height = level_dimensions[level]
    remaining = max(level_width / width, level_height / height)
    reduce_factor = max(1, int(np.floor(remaining + 1e-9)))
    return ReadPlan(
        level=level,
        level_downsample=float(level_downsamples[level]),
        level_size=(int(level_width), int(level_height)),
        reduce_factor=reduce_factor,
        tile_size=_tile_size(reduce_factor, (native_tile or {}).get(level)),
        output_size=(int(width), int(height)),
    )


def _tile_size(reduce_factor: int, native: tuple[int, int] | None) -> int:
    step = reduce_factor
    if native and all(native):
        aligned = math.lcm(reduce_factor, *native)
        if aligned <= MAX_TILE_SIZE:
            step = aligned
    return max(step, (TILE_SIZE // step) * step)


def native_tile_sizes(properties) -> dict[int, tuple[int, int]]:
    """The stored tile size of each level, from openslide's `openslide.level[k].tile-width/-height`."""
    sizes = {}
    for level in range(int(properties.get("openslide.level-count", 0))):
        try:
            sizes[level] = (
                int(properties[f"openslide.level[{level}].tile-width"]),
                int(properties[f"openslide.level[{level}].tile-height"]),
            )
        except (KeyError, ValueError):
            continue
    return sizes


def background_colour(properties) -> tuple[int, int, int]:
    """The slide's `openslide.background-color` (hex RRGGBB), white when absent or malformed."""
    value = properties.get("openslide.background-color", "FFFFFF")
    try:
        return tuple(int(value[i : i + 2], 16) for i in (0, 2, 4))  # type: ignore[return-value]
    except (ValueError, TypeError):
        return (255, 255, 255)


def _check_canvas_budget(slide_path: Path, plan: ReadPlan) -> None:
    """The intermediate canvas is the one allocation that grows with the request; refuse absurd outputs."""
    width, height = plan.level_size
    canvas_pixels = -(-width // plan.reduce_factor) * -(-height // plan.reduce_factor)
    if canvas_pixels > CANVAS_PIXEL_BUDGET:
        raise ConversionError(
            f"{slide_path} would need a {canvas_pixels / 1e6:.0f}-megapixel canvas for a "
            f"{plan.output_size[0]}×{plan.output_size[1]} output; ask for a smaller --max-size"
        )


def _read_stored_tiles(
    slide_path: Path, properties: dict[str, str], plan: ReadPlan, background: tuple[int, int, int], as_mask: bool
) -> np.ndarray | None:
    """The tifffile fast path for plain tiled TIFF levels that must shrink a lot; None when it does not apply."""
    if as_mask or plan.reduce_factor < FAST_PATH_MIN_FACTOR or properties.get("openslide.vendor") != "generic-tiff":
        return None
    try:
        return reduce_tiled_level(slide_path, plan.level_size, plan.reduce_factor, background)
    except Exception:  # anything tifffile dislikes is left to openslide, which reports it properly
        return None


def _read_level(slide, plan: ReadPlan, background: tuple[int, int, int], as_mask: bool) -> tuple[np.ndarray, int]:
    """Stream the chosen level tile by tile into a canvas shrunk by `plan.reduce_factor`; for a
    mask, straight into the output grid (the level pixel nearest each output pixel's centre)."""
    level_width, level_height = plan.level_size
    factor, tile = plan.reduce_factor, plan.tile_size
    if as_mask:
        rows = nearest_samples(level_height, plan.output_size[1])
        columns = nearest_samples(level_width, plan.output_size[0])
        canvas = np.zeros((len(rows), len(columns)), np.uint8)
    else:
        canvas = np.zeros((-(-level_height // factor), -(-level_width // factor), 3), np.uint8)
    origins = [(x, y) for y in range(0, level_height, tile) for x in range(0, level_width, tile)]

    def read_tile(origin: tuple[int, int]) -> tuple[tuple[int, int], np.ndarray]:
        x, y = origin
        size = (min(tile, level_width - x), min(tile, level_height - y))
        location = (int(round(x * plan.level_downsample)), int(round(y * plan.level_downsample)))  # level-0 coords
        region = slide.read_region(location, plan.level, size)
        if as_mask:
            return origin, _sample_labels(region, rows, columns, origin)
        return origin, _shrink_tile(region, factor, background)

    with ThreadPoolExecutor(max_workers=READ_THREADS) as pool:
        for (x, y), part in pool.map(read_tile, origins):
            if as_mask:
                top, left = int(np.searchsorted(rows, y)), int(np.searchsorted(columns, x))
            else:
                top, left = y // factor, x // factor
            canvas[top : top + part.shape[0], left : left + part.shape[1]] = part
    return canvas, len(origins)


def nearest_samples(length: int, count: int) -> np.ndarray:
    """The pixel nearest the centre of each of `count` output pixels spread over `length`, as
    Pillow's NEAREST resize samples it (asked of Pillow itself, with a ramp of pixel indices, so
    its rounding is matched exactly): a mask lands on the grid its LANCZOS-resized image fills."""
    ramp = Image.fromarray(np.arange(length, dtype=np.int32).reshape(1, length))  # mode "I"
    return np.asarray(ramp.resize((count, 1), Image.Resampling.NEAREST))[0].astype(np.int64)


def _sample_labels(region: Image.Image, rows: np.ndarray, columns: np.ndarray, origin: tuple[int, int]) -> np.ndarray:
    """The labels (first channel) of one tile at the output's sample rows and columns inside it."""
    x, y = origin
    width, height = region.size
    inside_rows = rows[(rows >= y) & (rows < y + height)] - y
    inside_columns = columns[(columns >= x) & (columns < x + width)] - x
    return np.asarray(region.getchannel("R"))[np.ix_(inside_rows, inside_columns)]


def _shrink_tile(region: Image.Image, factor: int, background: tuple[int, int, int]) -> np.ndarray:
    """Composite (only where a tile has transparency) and box-shrink one RGBA tile, staying in Pillow."""
    if region.getchannel("A").getextrema()[0] == 255:  # fully scanned tile: nothing to composite
        rgb = region.convert("RGB")
    else:
        rgb = Image.fromarray(display.composite_on_background(np.asarray(region), background))
    return np.asarray(rgb.reduce(factor) if factor > 1 else rgb)


def _params(
    slide_path: Path,
    properties: dict[str, str],
    plan: ReadPlan,
    background: tuple[int, int, int],
    tiles: int | None,
    as_mask: bool,
) -> dict[str, Any]:
    def number(key: str) -> float | None:
        try:
            return float(properties[key])
        except (KeyError, ValueError):
            return None

    return {
        "vendor": properties.get("openslide.vendor"),
        "slide_file": slide_path.name,
        "level": plan.level,
        "level_downsample": plan.level_downsample,
        "level_dimensions": list(plan.level_size),
        "level0_dimensions": [int(number(f"openslide.level[0].{side}") or 0) for side in ("width", "height")],
        "level_count": int(properties.get("openslide.level-count", 1)),
        "downsample": round(plan.level_downsample * plan.level_size[0] / plan.output_size[0], 4),
        "output_size": list(plan.output_size),
        "mpp": [number("openslide.mpp-x"), number("openslide.mpp-y")],
        "objective_power": number("openslide.objective-power"),
        "background": "#%02X%02X%02X" % background,
        "read": {"tiles": tiles, "tile_size": plan.tile_size if tiles else None, "reduce_factor": plan.reduce_factor},
        "resample": "nearest level pixel per output pixel" if as_mask else "box reduce per tile, then lanczos",
    }
