"""OME-TIFF and plain TIFF (tifffile + imagecodecs) to 8-bit grayscale or RGB.

The rules, in the order they are applied:

* **Series and level.** Series 0. Of its pyramid levels (`series.levels`, base first) the
  smallest one whose longest side is still at least `options.max_size` is read; without a size,
  the base, or the largest level whose plane fits `PIXEL_BUDGET`. The result is then resized with
  LANCZOS (nearest for masks). A plane over the budget with no smaller level is refused: such
  images belong to the whole-slide path, which streams tiles.
* **Which plane.** Only the pages of one plane are read (`TiffFile.asarray(key=pages)`).
  Axes other than Y, X, channels (C) and samples (S) — Z, T, generic page stacks (Q/I) — are
  held at their middle index each; an integer `options.frame` instead indexes the flattened
  stack of those axes in the file's order (row-major). The chosen index per axis is recorded.
* **Colour.**
  - Separated (photometric 5) images with InkSet CMYK (the default) are converted to RGB with
    Pillow's CMYK conversion; other ink sets are blended like channels.
  - RGB(A) samples (S = 3 or 4) stay colour: 8-bit kept, RGBA composited onto white, deeper or
    float data scaled by one percentile window over all three samples (keeps the colour balance).
  - Several channels (C > 1, or S not 3/4): fluorescence, blended additively: each channel is
    scaled by its own 0.5–99.5 percentile window to 0..1, multiplied by its colour and summed
    (clipped). A channel's colour is its OME `Color` when present, else looked up by its `Name`
    in `CHANNEL_NAME_COLOURS` (DAPI → blue, GFP → green, …), else `DEFAULT_PALETTE` by position
    (ImageJ files: the brightest entry of each channel's LUT plays the part of the OME colour);
    the source of every colour is recorded.
  - One channel: 8-bit kept as is; 16-bit, 32-bit and float scaled by the percentile window of
    the plane, never by bit shifting (12-bit data in 16-bit containers stays visible);
    `options.window` overrides the window, also for 8-bit; palette images go through their
    colour map; grey + alpha is composited onto white. MINISWHITE (0 is white: TIFF's
    MONOCHROME1) is inverted after windowing, as DICOM does.
* **Sparse files.** Tiles or strips never written (byte count 0) are background: white in
  images (left out of every window), label 0 in masks; `missing_tiles` records how many pixels.
* **Orientation.** The Orientation tag (274, as in EXIF) is applied before resizing, to images
  and masks alike, with the transposes `ImageOps.exif_transpose` uses.
* **Masks** (`options.as_mask`): one channel, values kept (`display.to_label_image`), nearest.
"""
from __future__ import annotations

import re
import xml.etree.ElementTree as ElementTree
from pathlib import Path
from typing import Any

import numpy as np
import tifffile
from PIL import Image

from mmbu.build.convert import display
from mmbu.build.convert.base import ConversionError, Converted, ConvertOptions, exception_summary as _cause
from mmbu.core.geometry import ORIENTATION_TRANSPOSES, ConversionGeometry

PIXEL_BUDGET = 1 << 28  # 268 M samples of one plane; beyond that the WSI path's tiling is needed

# Fluorescence channel names (normalised: lower case, letters and digits only) to display colours.
# Checked in order, first substring match wins; numbers are excitation/emission lines or dye names.
CHANNEL_NAME_COLOURS: tuple[tuple[str, tuple[int, int, int]], ...] = (
    ("dapi", (0, 0, 255)),
    ("hoechst", (0, 0, 255)),
    ("nucle", (0, 0, 255)),
    ("dna", (0, 0, 255)),
    ("405", (0, 0, 255)),
    ("cy5", (255, 0, 255)),
    ("647", (255, 0, 255)),
    ("640", (255, 0, 255)),
    ("gfp", (0, 255, 0)),
    ("fitc", (0, 255, 0)),
    ("488", (0, 255, 0)),
    ("green", (0, 255, 0)),
    ("cy3", (255, 0, 0)),
    ("tritc", (255, 0, 0)),
    ("rfp", (255, 0, 0)),
    ("mcherry", (255, 0, 0)),
    ("tdtomato", (255, 0, 0)),
    ("texasred", (255, 0, 0)),
    ("555", (255, 0, 0)),
    ("561", (255, 0, 0)),
    ("568", (255, 0, 0)),
    ("594", (255, 0, 0)),
    ("red", (255, 0, 0)),
    ("blue", (0, 0, 255)),
)
# Used only when a channel has neither an OME colour nor a recognisable name.
DEFAULT_PALETTE: tuple[tuple[int, int, int], ...] = (
    (255, 0, 0),
    (0, 255, 0),
    (0, 0, 255),
    (255, 0, 255),
    (0, 255, 255),
    (255, 255, 0),
    (255, 255, 255),
)
PERCENTILES = f"{display.DEFAULT_LOW_PERCENTILE:g}-{display.DEFAULT_HIGH_PERCENTILE:g}"
TAG_INKSET, INKSET_CMYK = 332, 1  # InkSet of separated (photometric 5) images; absent means CMYK
CHANNEL_AXIS = "C"
TAG_ORIENTATION = 274
# Orientation tag value -> the Pillow transpose that shows the image upright (as ImageOps.exif_transpose)
ORIENTATION_TRANSPOSE = {code: Image.Transpose[name] for code, name in ORIENTATION_TRANSPOSES.items()}
 # tifffile's axis code for channels; every other axis before Y is a stack (Z, T, Q, I, ...)


def read_ome(path: Path, options: ConvertOptions) -> Converted:
    """Convert an OME-TIFF: OME channel names and colours drive the fluorescence blend."""
    return _convert(Path(path), options, "ome-tiff")


def read_tiff(path: Path, options: ConvertOptions) -> Converted:
    """Convert a plain (possibly multi-page, 16-bit or float) TIFF."""
    return _convert(Path(path), options, "tiff")


def _convert(path: Path, options: ConvertOptions, format_name: str) -> Converted:
    try:
        tiff = tifffile.TiffFile(path)
    except FileNotFoundError as exc:
        raise ConversionError(f"{path} does not exist") from exc
    except Exception as exc:  # TiffFileError, struct errors, OSError on truncated headers
        raise ConversionError(f"{path} is not a readable TIFF file ({_cause(exc)})") from exc
    with tiff:
        if not tiff.series:
            raise ConversionError(f"{path} holds no image series")
        series = tiff.series[0]
        level_index = select_level(series, options.max_size)
        level = series.levels[level_index]
        axes, shape = level.get_axes(False), level.get_shape(False)
        geometry = ConversionGeometry.kept(plane_size(series.levels[0])).then("level", plane_size(level))
        plane, plane_index, missing = _read_plane(tiff, path, level_index, level, axes, shape, options.frame)
        channels_meta = _file_channels(tiff)
        photometric = tifffile.PHOTOMETRIC(level.keyframe.photometric)
        colormap = level.keyframe.colormap if photometric == tifffile.PHOTOMETRIC.PALETTE else None
        inkset = int(level.keyframe.tags.valueof(TAG_INKSET, INKSET_CMYK))
        orientation = int(level.keyframe.tags.valueof(TAG_ORIENTATION, 1))
        params: dict[str, Any] = {
            "series": 0,
            "series_kind": series.kind,
            "level": level_index,
            "level_count": len(series.levels),
            "level_shape": [int(n) for n in level.shape],
            "axes": series.axes,
            "plane": plane_index,
            "dtype": str(plane.dtype),
            "compression": level.keyframe.compression.name,
            "photometric": photometric.name,
            "orientation": orientation,
            "missing_tiles": None,
        }
    if options.as_mask:
        pixels = _labels(plane, path)  # a tile never written reads as 0: background label
        params["channels"] = None
    else:
        sizes = dict(zip(axes, shape))
        # samples (S) of one channel are colour (+ alpha); channels (C) are fluorescence to blend
        colour_samples = sizes.get("S", 1) if sizes.get("C", 1) == 1 else 1
        pixels, params["channels"] = _to_display(
            plane, channels_meta, colormap, colour_samples, options.window, photometric, inkset, missing
        )
        if missing is not None:  # tiles never written are background, white as openslide paints them
            pixels = np.where(missing[..., None] if pixels.ndim == 3 else missing, np.uint8(255), pixels)
    if missing is not None:
        fill = "label 0" if options.as_mask else "white"
        params["missing_tiles"] = {"pixels": int(missing.sum()), "fill": fill}
    pixels, params["orientation_applied"] = upright(pixels, orientation)
    if params["orientation_applied"]:
        geometry = geometry.then("orient", (pixels.shape[1], pixels.shape[0]), how=params["orientation_applied"])
    pixels = display.resize_longest_side(pixels, options.max_size, is_mask=options.as_mask)
    geometry = geometry.then("resize", (pixels.shape[1], pixels.shape[0]), how="nearest" if options.as_mask else "lanczos")
    frame = options.frame if isinstance(options.frame, int) else None
    return Converted(pixels=pixels, format=format_name, frame=frame, params=params, geometry=geometry)


def upright(pixels: np.ndarray, orientation: int) -> tuple[np.ndarray, str | None]:
    """Apply the TIFF Orientation tag (the EXIF one) as `ImageOps.exif_transpose` does, with the
    same Pillow transposes; images and 8-bit label masks alike. Returns the pixels and the
    transpose applied (None for orientation 1 or an invalid value)."""
    method = ORIENTATION_TRANSPOSE.get(orientation)
    if method is None:
        return pixels, None
    return np.asarray(Image.fromarray(pixels).transpose(method)), method.name


def select_level(series: tifffile.TiffPageSeries, max_size: int | None) -> int:
    """The pyramid level to read.

    With `max_size`: the smallest level whose longest side is still at least `max_size`.
    Without: the base, unless one plane of it exceeds `PIXEL_BUDGET`; then the largest level that
    fits (a whole-slide OME pyramid converts at the finest size memory allows instead of failing).
    """
    if max_size is None:
        for index, level in enumerate(series.levels):
            if plane_samples(level) <= PIXEL_BUDGET:
                return index
        return 0
    chosen = 0
    for index, level in enumerate(series.levels):
        sizes = dict(zip(level.get_axes(False), level.get_shape(False)))
        if max(sizes.get("Y", 1), sizes.get("X", 1)) >= max_size:
            chosen = index
    return chosen


def plane_size(level: tifffile.TiffPageSeries) -> tuple[int, int]:
    """(width, height) of one plane of a level."""
    sizes = dict(zip(level.get_axes(False), level.get_shape(False)))
    return sizes.get("X", 1), sizes.get("Y", 1)


def plane_samples(level: tifffile.TiffPageSeries) -> int:
    """Samples in one plane of a level with all its channels: what reading one plane allocates."""
    sizes = dict(zip(level.get_axes(False), level.get_shape(False)))
    return sizes.get("Y", 1) * sizes.get("X", 1) * sizes.get("S", 1) * sizes.get("C", 1)


def _read_plane(
    tiff: tifffile.TiffFile,
    path: Path,
    level_index: int,
    level: tifffile.TiffPageSeries,
    axes: str,
    shape: tuple[int, ...],
    frame: int | str,
) -> tuple[np.ndarray, dict[str, int], np.ndarray | None]:
    """Read the pages of one plane: (Y, X, channels), the index chosen on each stacked axis, and
    where no page of the plane has data (tiles or strips never written), or None when all is there."""
    # every page holds one Y×X plane (with its samples); the axes before Y enumerate the pages
    outer_axes = axes[: axes.index("Y")] if "Y" in axes and "X" in axes else None
    if outer_axes is not None and outer_axes.endswith("S") and level.keyframe.axes.startswith("S"):
        outer_axes = outer_axes[:-1]  # planar samples live inside the page
    if outer_axes is None:
        raise ConversionError(f"{path} has axes {axes!r} without a Y×X image plane")
    outer_shape = shape[: len(outer_axes)]
    if int(np.prod(outer_shape, dtype=np.int64)) != len(level.pages):
        needed = int(np.prod(outer_shape))
        raise ConversionError(f"{path} lists {len(level.pages)} pages where its axes {axes!r} need {needed}")
    sizes = dict(zip(axes, shape))
    if plane_samples(level) > PIXEL_BUDGET:
        raise ConversionError(
            f"{path} has a {sizes['X']}×{sizes['Y']} plane ({plane_samples(level) / 1e6:.0f} M samples) and no "
            "pyramid level within the memory budget; convert it as a whole-slide image"
        )
    keys, plane_index = _page_keys(outer_axes, outer_shape, frame, path)
    try:
        data = tiff.asarray(key=keys, series=0, level=level_index, maxworkers=2)
    except Exception as exc:  # truncated strips, unknown or unavailable codecs, corrupt tiles
        if "COMPRESSION" in str(exc):
            raise ConversionError(f"{path} uses a compression that cannot be decoded ({_cause(exc)})") from exc
        raise ConversionError(f"{path} has pixel data that cannot be decoded ({_cause(exc)})") from exc
    keyframe_shape = tuple(level.keyframe.shape)
    data = data.reshape((len(keys), *keyframe_shape))
    if level.keyframe.axes.startswith("S"):  # planar samples: (S, Y, X) pages
        data = np.moveaxis(data, 1, -1)
    if data.ndim == 3:
        data = data[..., None]
    # (channels, Y, X, samples) -> (Y, X, channels * samples)
    plane = np.moveaxis(data, 0, 2).reshape(data.shape[1], data.shape[2], -1)
    return plane, plane_index, _unwritten_pixels(level, keys, plane.shape[:2])


def _unwritten_pixels(level: tifffile.TiffPageSeries, keys: list[int], size: tuple[int, int]) -> np.ndarray | None:
    """Pixels whose tile (or strip) is absent from every page read: a sparse TIFF stores such
    chunks with byte count 0 and tifffile decodes them as zeros. None when nothing is absent."""
    keyframe = level.keyframe
    if keyframe.is_tiled:
        chunk_height, chunk_width = keyframe.tilelength, keyframe.tilewidth
    else:
        # RowsPerStrip may be 2**32 - 1 ("one strip"): never more than the image is tall
        chunk_height, chunk_width = min(keyframe.rowsperstrip or size[0], keyframe.imagelength), keyframe.imagewidth
    down, across = -(-keyframe.imagelength // chunk_height), -(-keyframe.imagewidth // chunk_width)
    absent = np.ones((down, across), bool)
    for key in keys:
        page = level.pages[key]
        counts = np.asarray(page.databytecounts) == 0
        offsets = np.asarray(page.dataoffsets) == 0
        if counts.size % (down * across):
            return None  # a layout this reading does not understand: trust the decoded values
        absent &= (counts | offsets).reshape(-1, down, across).all(axis=0)  # planar samples, depth
    if not absent.any():
        return None
    pixels = np.repeat(np.repeat(absent, chunk_height, axis=0), chunk_width, axis=1)
    return np.ascontiguousarray(pixels[: size[0], : size[1]])


def _page_keys(
    outer_axes: str, outer_shape: tuple[int, ...], frame: int | str, path: Path
) -> tuple[list[int], dict[str, int]]:
    """Page numbers of every channel of the chosen plane, and the index chosen on each stacked axis."""
    stacked = [i for i, axis in enumerate(outer_axes) if axis != CHANNEL_AXIS]
    chosen = dict(zip(stacked, _plane_indices([outer_shape[i] for i in stacked], frame, path)))
    channel_position = outer_axes.find(CHANNEL_AXIS)
    n_channels = outer_shape[channel_position] if channel_position >= 0 else 1
    keys = []
    for channel in range(n_channels):
        index = [chosen.get(i, 0) for i in range(len(outer_axes))]
        if channel_position >= 0:
            index[channel_position] = channel
        keys.append(int(np.ravel_multi_index(index, outer_shape)) if outer_axes else 0)
    return keys, {outer_axes[i]: int(value) for i, value in chosen.items()}


def _plane_indices(stack_shape: list[int], frame: int | str, path: Path) -> list[int]:
    """Middle of every stacked axis, or an integer frame unravelled over their flattened stack."""
    if frame == "middle":
        return [n // 2 for n in stack_shape]
    total = int(np.prod(stack_shape, dtype=np.int64)) if stack_shape else 1
    if not isinstance(frame, int) or not 0 <= frame < total:
        raise ConversionError(f"page {frame!r} is outside 0..{total - 1} of the image stack in {path}")
    return [int(v) for v in np.unravel_index(frame, stack_shape)] if stack_shape else []


def _file_channels(tiff: tifffile.TiffFile) -> list[dict[str, Any]]:
    """Channel names and colours the file declares: OME-XML, or ImageJ's LUTs and slice labels."""
    if tiff.is_ome:
        return _ome_channels(tiff.ome_metadata)
    if tiff.is_imagej:
        return _imagej_channels(tiff.imagej_metadata or {})
    return []


def _imagej_channels(metadata: dict[str, Any]) -> list[dict[str, Any]]:
    """ImageJ keeps a colour lookup table per channel; its brightest entry is the channel's colour.
    Slice labels name the channels only when there is one label per channel."""
    luts = metadata.get("LUTs") or []
    labels = metadata.get("Labels") or []
    names = labels if len(labels) == len(luts) else [None] * len(luts)
    return [
        {"name": name, "colour": tuple(int(v) for v in np.asarray(lut)[:3, -1]), "source": "imagej-lut"}
        for name, lut in zip(names, luts)
    ]


def _ome_channels(ome_xml: str | None) -> list[dict[str, Any]]:
    """Name and colour (RGB, or None) of each Channel of the first OME Image."""
    if not ome_xml:
        return []
    try:
        root = ElementTree.fromstring(ome_xml)
    except ElementTree.ParseError:
        return []
    pixels = root.find("{*}Image/{*}Pixels")
    if pixels is None:
        return []
    channels = []
    for element in pixels.findall("{*}Channel"):
        colour = element.get("Color")
        unpacked = _unpack_ome_colour(colour) if colour else None
        channels.append({"name": element.get("Name"), "colour": unpacked, "source": "ome-color"})
    return channels


def _unpack_ome_colour(value: str) -> tuple[int, int, int] | None:
    """OME stores colours as a signed 32-bit RGBA integer."""
    try:
        packed = int(value) & 0xFFFFFFFF
    except ValueError:
        return None
    return (packed >> 24) & 0xFF, (packed >> 16) & 0xFF, (packed >> 8) & 0xFF


def channel_colour(
    name: str | None, file_colour: tuple[int, int, int] | None, position: int, file_source: str = "ome-color"
) -> tuple[tuple[int, int, int], str]:
    """The display colour of a channel and where it came from: OME colour, its name, or the palette."""
    if file_colour is not None and any(file_colour):
        return file_colour, file_source
    if name:
        normalised = re.sub(r"[^a-z0-9]", "", name.lower())
        for keyword, colour in CHANNEL_NAME_COLOURS:
            if keyword in normalised:
                return colour, f"name:{keyword}"
    return DEFAULT_PALETTE[position % len(DEFAULT_PALETTE)], "default-palette"


def _to_display(
    plane: np.ndarray,
    channels_meta: list[dict[str, Any]],
    colormap: np.ndarray | None,
    colour_samples: int,
    window: tuple[float, float] | None,
    photometric: tifffile.PHOTOMETRIC,
    inkset: int,
    missing: np.ndarray | None,
) -> tuple[np.ndarray, list[dict[str, Any]]]:
    """8-bit grey or RGB; `missing` pixels (unwritten tiles) take no part in any window."""
    separated = photometric == tifffile.PHOTOMETRIC.SEPARATED
    if separated and inkset == INKSET_CMYK and colour_samples >= 4:
        return _cmyk(plane)
    if separated and plane.shape[2] > 1:  # other ink sets: each ink is a channel of the blend
        return blend_channels(plane, channels_meta, missing)
    if plane.shape[2] == 1:
        return grey_channel(plane[..., 0], colormap, window, photometric, missing)
    if colour_samples == 2:  # grey + alpha
        grey, record = grey_channel(plane[..., 0], None, window, photometric, missing)
        rgba = np.dstack([grey, grey, grey, _full_range_to_uint8(plane[..., 1])])
        composited = display.composite_on_background(rgba)[..., 0]
        return composited, [{**record[0], "name": "grey+alpha composited onto white"}]
    if colour_samples in (3, 4):
        return rgb_samples(plane, missing)
    return blend_channels(plane, channels_meta, missing)


def _full_range_to_uint8(values: np.ndarray) -> np.ndarray:
    """Alpha or ink amounts in the sample's full range (0..255, 0..65535, or 0..1 for floats) as 0..255."""
    if values.dtype == np.uint8:
        return values
    if np.issubdtype(values.dtype, np.integer):
        return np.rint(values.astype(np.float64) * 255.0 / np.iinfo(values.dtype).max).astype(np.uint8)
    return np.rint(np.clip(values, 0.0, 1.0) * 255.0).astype(np.uint8)


def _cmyk(plane: np.ndarray) -> tuple[np.ndarray, list[dict[str, Any]]]:
    """Separated CMYK inks to RGB with Pillow's conversion, R = (255 - C)(255 - K) / 255 and so on.

    Ink amounts are absolute fractions of the sample range, so they are scaled, never windowed;
    a fifth sample is alpha, composited onto white like RGBA.
    """
    inks = np.ascontiguousarray(_full_range_to_uint8(plane[..., :4]))
    rgb = np.asarray(Image.fromarray(inks, "CMYK").convert("RGB"))
    source = "CMYK converted to RGB"
    if plane.shape[2] >= 5:
        rgb = display.composite_on_background(np.dstack([rgb, _full_range_to_uint8(plane[..., 4])]))
        source += ", alpha composited onto white"
    window = {"lo": 0, "hi": 255, "source": "ink amounts over the full sample range"}
    return rgb, [{"name": source, "colour": None, "window": window}]


def grey_channel(
    values: np.ndarray,
    colormap: np.ndarray | None,
    center_width: tuple[float, float] | None,
    photometric: tifffile.PHOTOMETRIC,
    missing: np.ndarray | None,
) -> tuple[np.ndarray, list[dict[str, Any]]]:
    """One channel, windowed; MINISWHITE (0 is white, TIFF's MONOCHROME1) inverted after windowing."""
    pixels, records = _grey_windowed(values, colormap, center_width, missing)
    if photometric == tifffile.PHOTOMETRIC.MINISWHITE:
        return display.invert(pixels), [{**records[0], "inverted": "MINISWHITE, after windowing"}]
    return pixels, records


def _grey_windowed(
    values: np.ndarray,
    colormap: np.ndarray | None,
    center_width: tuple[float, float] | None,
    missing: np.ndarray | None,
) -> tuple[np.ndarray, list[dict[str, Any]]]:
    """One channel: palette through its map, 8-bit as is, else the user's window or percentiles."""
    if colormap is not None:
        lut = np.rint(np.asarray(colormap, np.float64).T / 257.0).astype(np.uint8)  # 16-bit map entries to 8-bit
        return lut[np.clip(values, 0, len(lut) - 1)], [{"name": None, "colour": None, "window": "palette colour map"}]
    if values.dtype == np.uint8 and center_width is None:
        return values, [{"name": None, "colour": None, "window": {"lo": 0, "hi": 255, "source": "8-bit kept"}}]
    if values.dtype == bool:
        window = {"lo": 0, "hi": 1, "source": "bilevel"}
        return values.astype(np.uint8) * 255, [{"name": None, "colour": None, "window": window}]
    values = values.astype(np.float64, copy=False)
    if center_width is not None:
        pixels, window = display.grey_to_uint8(values, center_width)
    else:
        lo, hi, source = display.robust_window(values, ignore=missing)
        pixels, window = display.window_to_uint8(values, lo, hi), {"lo": lo, "hi": hi, "source": source}
    return pixels, [{"name": None, "colour": None, "window": window}]


def rgb_samples(plane: np.ndarray, missing: np.ndarray | None) -> tuple[np.ndarray, list[dict[str, Any]]]:
    if plane.dtype != np.uint8:
        ignore = None if missing is None else np.broadcast_to(missing[..., None], plane[..., :3].shape)
        lo, hi = display.percentile_window(plane[..., :3].astype(np.float64), ignore=ignore)
        window = {"lo": lo, "hi": hi, "source": "percentile over R, G and B together"}
        scaled = display.window_to_uint8(plane.astype(np.float64), lo, hi)
    else:
        window = {"lo": 0, "hi": 255, "source": "8-bit kept"}
        scaled = plane
    if plane.shape[2] == 4:
        rgb = display.composite_on_background(np.ascontiguousarray(scaled), (255, 255, 255))
        source = "RGBA composited onto white"
    else:
        rgb, source = np.ascontiguousarray(scaled), "RGB"
    return rgb, [{"name": source, "colour": None, "window": window}]


def blend_channels(
    plane: np.ndarray, channels_meta: list[dict[str, Any]], missing: np.ndarray | None
) -> tuple[np.ndarray, list[dict[str, Any]]]:
    """Additive fluorescence blend: per-channel percentile window, times the channel's colour, summed."""
    n = plane.shape[2]
    meta = channels_meta if len(channels_meta) == n else [{"name": None, "colour": None, "source": None}] * n
    total = np.zeros(plane.shape[:2] + (3,), np.float32)
    records = []
    for position in range(n):
        values = plane[..., position].astype(np.float32)
        lo, hi = display.percentile_window(values, ignore=missing)
        scaled = display.window_to_uint8(values, lo, hi).astype(np.float32) / 255.0
        entry = meta[position]
        colour, source = channel_colour(entry["name"], entry["colour"], position, entry["source"] or "ome-color")
        total += scaled[..., None] * (np.asarray(colour, np.float32) / 255.0)
        records.append(
            {
                "name": meta[position]["name"],
                "colour": "#%02X%02X%02X" % colour,
                "colour_source": source,
                "window": {"lo": lo, "hi": hi, "source": f"percentile {PERCENTILES}"},
            }
        )
    return np.clip(np.rint(total * 255.0), 0, 255).astype(np.uint8), records


def _labels(plane: np.ndarray, path: Path) -> np.ndarray:
    if plane.shape[2] != 1:
        raise ConversionError(f"{path} has {plane.shape[2]} channels, so it is not a single-channel label mask")
    return display.to_label_image(plane[..., 0])
