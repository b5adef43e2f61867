"""JPEG / PNG / BMP / GIF / WebP / JPEG 2000 (Pillow) → 8-bit L or RGB display pixels.

What is done, in order, and recorded in params:
- the size its header declares is checked against the pixel budget (`mmbu.core.budget`, by default Pillow's
  `Image.MAX_IMAGE_PIXELS`) before anything is decoded; Pillow's own decompression-bomb guard stays on as a
  second line (it refuses at twice that). Either is an error naming the file, not a memory blow-up;
- EXIF orientation is applied (`ImageOps.exif_transpose`), so camera photos stand upright;
- an embedded ICC profile is converted to sRGB (`ImageCms`), so colours mean the same in every PNG;
- transparency (RGBA, LA, palette with transparency, a grey/RGB colour key) is composited onto white;
- 16-bit and 32-bit integer / float grayscale is windowed by percentiles (or the user's window),
  never shifted (`>> 8` turns 12-bit data black);
- CMYK, YCbCr, LAB, HSV and palette images become RGB; 1-bit images become L;
- an 8-bit grey or RGB PNG none of these steps changed keeps its own image stream (`png_stream`), not re-encoded.
"""
from __future__ import annotations

import io
import os
import warnings
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, ImageCms, ImageOps, UnidentifiedImageError

from mmbu.build.convert.base import ConversionError, Converted, ConvertOptions
from mmbu.build.convert.display import composite_on_background, grey_to_uint8, to_label_image
from mmbu.build.convert.png_stream import PNG_SIGNATURE, image_stream
from mmbu.core.budget import check_plane
from mmbu.core.geometry import ORIENTATION_TRANSPOSES, ConversionGeometry

BACKGROUND = (255, 255, 255)  # transparent pixels are shown on white, as a browser would
HIGH_DEPTH_GREY = ("I;16", "I;16B", "I;16L", "I;16N", "I", "F")
TO_RGB = ("CMYK", "YCbCr", "LAB", "HSV", "RGBX")
SRGB_PROFILE = ImageCms.createProfile("sRGB")


# params keys of the steps that change pixels (`_to_display`, EXIF turns): a source PNG's own stream is kept only
# when none was taken. A new pixel-changing step must record one of these (or a new key listed here).
CHANGES_PIXELS = frozenset({"exif_orientation_applied", "palette_expanded", "transparency_key", "icc", "alpha",
                            "window"})
MAX_KEPT_PNG_BYTES = 256 << 20  # a larger PNG is decoded from its file and encoded again, not held in memory twice


def read(path: Path, options: ConvertOptions) -> Converted:
    """Read a Pillow-readable raster as 8-bit pixels, or its label values with `options.as_mask`."""
    path = Path(path)
    data = _png_bytes(path)
    with _open(path, data) as image:
        params: dict[str, Any] = {"decoder": f"Pillow {Image.__version__}", "source_format": image.format,
                                  "source_mode": image.mode}
        frame = _seek_frame(image, options.frame, path)
        check_plane(path, *image.size, channels=len(image.getbands()), sample_bytes=sample_bytes(image.mode))
        try:
            image.load()
            upright = ImageOps.exif_transpose(image)
        except (OSError, SyntaxError, ValueError) as error:
            raise ConversionError(f"{path} is truncated or corrupt ({error})") from None
        orientation = image.getexif().get(0x0112, 1)
        if orientation not in (None, 1):
            params["exif_orientation_applied"] = int(orientation)
        geometry = ConversionGeometry.kept(image.size)
        if orientation in ORIENTATION_TRANSPOSES:  # what exif_transpose applied
            geometry = geometry.then("orient", upright.size, how=ORIENTATION_TRANSPOSES[orientation])
        if options.as_mask:
            return Converted(_labels(upright, path), "raster", frame, params, geometry)
        pixels = _to_display(upright, options, params, path)
    return Converted(pixels, "raster", frame, params, geometry, png=_kept_stream(data, pixels, frame, params))


def sample_bytes(mode: str) -> int:
    """Bytes of one sample of a Pillow mode once decoded (16-bit grey 2; 32-bit integer and float 4; else 1)."""
    return 2 if mode.startswith("I;16") else 4 if mode in ("I", "F") else 1


def _kept_stream(data: bytes | None, pixels: np.ndarray, frame: int | None, params: dict[str, Any]) -> bytes | None:
    """The source PNG's own stream when `pixels` are its decoded pixels unchanged (see `png_stream`)."""
    if data is None or frame is not None or params["source_mode"] not in ("L", "RGB") or params.keys() & CHANGES_PIXELS:
        return None
    png = image_stream(data, pixels.shape[1], pixels.shape[0], 1 if pixels.ndim == 2 else 3)
    if png is not None:
        params["png_stream"] = "kept from the source (IHDR, IDAT, IEND; ancillary chunks dropped)"
    return png


def _png_bytes(path: Path) -> bytes | None:
    """The file's bytes when it is a PNG small enough to hold (its image stream may be kept as it is), else None."""
    try:
        with open(path, "rb") as file:
            if file.read(len(PNG_SIGNATURE)) != PNG_SIGNATURE or os.fstat(file.fileno()).st_size > MAX_KEPT_PNG_BYTES:
                return None
            file.seek(0)  # read whole, not appended to the signature: that copied every PNG once more
            return file.read()
    except OSError:
        return None  # reported by `_open` in its own words


def _open(path: Path, data: bytes | None = None) -> Image.Image:
    """Pillow's image of `path`, decoded from `data` when the file was read already (the same bytes)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)  # only the hard limit refuses
            return Image.open(path if data is None else io.BytesIO(data))
    except Image.DecompressionBombError:
        raise ConversionError(
            f"{path} is larger than Pillow's decompression-bomb limit ({Image.MAX_IMAGE_PIXELS:,} pixels, "
            "refused above twice that); a raster this large must go through the whole-slide path "
            "(save it as a tiled pyramidal TIFF)"
        ) from None
    except UnidentifiedImageError:
        raise ConversionError(f"{path} cannot be identified as an image by Pillow") from None
    except OSError as error:
        raise ConversionError(f"{path} is truncated or corrupt ({error})") from None


def _seek_frame(image: Image.Image, requested: int | str, path: Path) -> int | None:
    """Animated GIF/WebP/APNG: frame 0 unless an index is asked for ('middle' means the first here)."""
    frames = int(getattr(image, "n_frames", 1))
    if frames <= 1:
        return None
    index = 0 if requested == "middle" else int(requested)
    if not 0 <= index < frames:
        raise ConversionError(f"frame {index} was requested but {path} has {frames} frame(s) (0-based)")
    image.seek(index)
    return index


def _to_display(image: Image.Image, options: ConvertOptions, params: dict, path: Path) -> np.ndarray:
    if image.mode in HIGH_DEPTH_GREY:
        values = np.asarray(image)
        pixels, params["window"] = grey_to_uint8(values, options.window)
        return pixels
    if image.mode == "1":
        return np.asarray(image.convert("L"))
    if image.mode in ("P", "PA"):
        has_alpha = image.mode == "PA" or "transparency" in image.info
        image = image.convert("RGBA" if has_alpha else "RGB")
        params["palette_expanded"] = True
    elif image.mode in ("L", "RGB") and "transparency" in image.info:
        # a PNG/GIF colour key (tRNS): that grey or colour is transparent, like an alpha of 0
        image = image.convert("LA" if image.mode == "L" else "RGBA")
        params["transparency_key"] = True
    image = _to_srgb(image, params, path)
    if image.mode in TO_RGB:
        image = image.convert("RGB")
    if image.mode == "LA":
        grey_alpha = np.asarray(image)
        rgba = np.dstack([grey_alpha[..., 0]] * 3 + [grey_alpha[..., 1]])
        params["alpha"] = f"composited on {BACKGROUND}"
        return composite_on_background(rgba, BACKGROUND)[..., 0]
    if image.mode == "RGBA":
        params["alpha"] = f"composited on {BACKGROUND}"
        return composite_on_background(np.asarray(image), BACKGROUND)
    if image.mode in ("L", "RGB"):
        return np.asarray(image)
    raise ConversionError(f"{path} has the image mode {image.mode}, which this converter does not handle")


def _to_srgb(image: Image.Image, params: dict, path: Path) -> Image.Image:
    """Convert colour with an embedded ICC profile to sRGB; grayscale profiles are left alone."""
    icc = image.info.get("icc_profile")
    if not icc or image.mode not in ("RGB", "RGBA", "CMYK"):
        return image
    try:
        source_profile = ImageCms.ImageCmsProfile(io.BytesIO(icc))
        output_mode = "RGBA" if image.mode == "RGBA" else "RGB"
        converted = ImageCms.profileToProfile(image, source_profile, SRGB_PROFILE, outputMode=output_mode)
    except (ImageCms.PyCMSError, OSError, ValueError) as error:
        params["icc"] = f"embedded profile unreadable, colours kept as stored ({error})"
        return image
    description = ImageCms.getProfileDescription(source_profile).strip()
    params["icc"] = f"converted from {description or 'embedded profile'} to sRGB"
    return converted


def _labels(image: Image.Image, path: Path) -> np.ndarray:
    if image.mode in ("RGB", "RGBA", "CMYK", "YCbCr", "LA", "PA"):
        raise ConversionError(f"{path} is a colour image ({image.mode}); a mask must hold one label value per pixel")
    return to_label_image(np.asarray(image))  # P: palette indices are the labels
