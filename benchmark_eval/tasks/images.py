"""Prepare an image for a model: resize to its limits, draw the region of interest, pad, encode.

The one documented ROI presentation (part of ``PROMPT_VERSION``): the image is first resized to
what the model will see, then the ROI is drawn on that copy as a 3-pixel pure-green
(0, 255, 0) outline placed just *outside* the region — a rectangle around each box for
box-grounded rows, the contour around the mask for mask-grounded rows — so the region's own
pixels are never painted over (`mmbu.core.drawing`, which the build's review sheet draws with too). The
question names the colour. The original is never modified.
"""
from __future__ import annotations

import base64
import hashlib
import io
import math
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property

import numpy as np
from PIL import Image

from mmbu.benchmark_eval.models.box_format import MAX_ASPECT_RATIO, smart_resize
from mmbu.benchmark_eval.models.registry import ImageLimits, ModelEntry, SmartResize
from mmbu.core import budget
from mmbu.core.drawing import ROI_COLOUR, ROI_COLOUR_NAME, draw_boxes, draw_mask_outline, mask_region

JPEG_QUALITIES = (92, 85, 75, 60, 45)


class ImageTooLarge(Exception):
    """The image cannot be brought within the model's limits; the message says why."""


class ImageUnreadable(Exception):
    """The release's image (or mask) bytes cannot be decoded."""


@dataclass(frozen=True)
class Frames:
    """The sizes (w, h) that tie a model's answer to the original image (see models.box_format), and
    where the resized image sits on the sent canvas (x, y; (0, 0) unless padded around it)."""

    image_size: tuple[int, int]
    content_size: tuple[int, int]
    sent_size: tuple[int, int]
    content_offset: tuple[int, int] = (0, 0)


@dataclass
class PreparedImage:
    """An encoded image, ready to send, with its frames; the data URL is built once and cached."""

    data: bytes
    mime: str
    frames: Frames

    @cached_property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()

    @cached_property
    def url_json(self) -> bytes:
        """The data URL as a JSON string (base64 needs no escaping), built once for a row's requests."""
        return b'"data:' + self.mime.encode("ascii") + b";base64," + base64.b64encode(self.data) + b'"'

    @cached_property
    def data_url(self) -> str:
        # from url_json, so a row whose requests carry both base64-encodes its image once
        return self.url_json[1:-1].decode("ascii")


def image_size_of(png: bytes) -> tuple[int, int]:
    """(w, h) from the image header only (no pixel decoding); ImageTooLarge when it is over the pixel budget
    (`mmbu.core.budget`), so such a sample costs one error record per question and is never decoded."""
    try:
        with Image.open(io.BytesIO(png)) as image:
            budget.check_plane("the release's image", *image.size, channels=len(image.getbands()))
            return image.size
    except budget.OverBudget as exc:
        raise ImageTooLarge(str(exc)) from exc
    except (OSError, Image.DecompressionBombError, ValueError) as exc:
        raise ImageUnreadable(f"image cannot be read ({exc})") from exc


def plan_frames(image_size: tuple[int, int], entry: ModelEntry) -> Frames:
    """The content and sent sizes the model's limits give for an original of `image_size`."""
    w, h = image_size
    resize = entry.box_format.resize
    limits = entry.image
    if isinstance(resize, SmartResize):
        content = _smart_resized(w, h, resize, entry.name)
    else:
        content = _fit(w, h, limits)
    pad = limits.square_pad
    if pad is not None:
        side = max(content)
        offset = (0, 0) if pad.position == "top_left" else ((side - content[0]) // 2, (side - content[1]) // 2)
        return Frames(image_size, content, (side, side), offset)
    return Frames(image_size, content, content)


def _smart_resized(w: int, h: int, resize: SmartResize, model: str) -> tuple[int, int]:
    """(w, h) after Qwen's smart_resize, checked to be a size the server's processor keeps as it is.

    The image is sent already resized, and the server runs smart_resize again on what it receives:
    rounding can push a long thin image past the aspect-ratio limit (8000x40 passes at 200:1 and is
    resized to 8008x28, which the server refuses at 286:1), so the check is made after resizing too.
    """
    try:
        new_h, new_w = smart_resize(h, w, resize.factor, resize.min_pixels, resize.max_pixels)
        again = smart_resize(new_h, new_w, resize.factor, resize.min_pixels, resize.max_pixels)
    except ValueError as exc:
        raise ImageTooLarge(f"a {w}x{h} image cannot be smart-resized for {model}: {exc}"
                            + ("" if max(w, h) / min(w, h) > MAX_ASPECT_RATIO else " after resizing")) from exc
    if again != (new_h, new_w):
        raise ImageTooLarge(f"a {w}x{h} image smart-resized for {model} to {new_w}x{new_h} would be resized again "
                            f"by the server to {again[1]}x{again[0]}")
    return new_w, new_h


def _fit(w: int, h: int, limits: ImageLimits) -> tuple[int, int]:
    """(w, h) scaled down, aspect kept, to within max_pixels and max_side (each side floored).

    A max_side scale is applied in integers: in floats 1317 x (896/1317) is 895.9999999999999, which
    floored a 1317-px long side to 895 and a 276x736 image to 251x672 instead of 252x672.
    """
    by_pixels = Fraction(limits.max_pixels, w * h) if limits.max_pixels and w * h > limits.max_pixels else None
    by_side = Fraction(limits.max_side, max(w, h)) if limits.max_side and max(w, h) > limits.max_side else None
    if by_pixels is None and by_side is None:
        return w, h
    if by_side is not None and (by_pixels is None or by_side * by_side <= by_pixels):
        new_w, new_h = max(1, w * limits.max_side // max(w, h)), max(1, h * limits.max_side // max(w, h))
    else:
        scale = math.sqrt(by_pixels)
        new_w, new_h = max(1, math.floor(w * scale)), max(1, math.floor(h * scale))
    if min(new_w, new_h) < 1 or max(w, h) / min(w, h) > 1000:
        raise ImageTooLarge(f"a {w}x{h} image cannot be fitted within the limits without vanishing")
    return new_w, new_h


def _decode(data: bytes, what: str) -> Image.Image:
    """The decoded image, after its header's size is checked against the budget the build's readers obey
    (`mmbu.core.budget`): a release image of 169 MP would cost gigabytes per worker once decoded and resized."""
    try:
        image = Image.open(io.BytesIO(data))
        budget.check_plane(f"the release's {what}", *image.size, channels=len(image.getbands()))
        image.load()
        return image
    except budget.OverBudget as exc:
        raise ImageTooLarge(str(exc)) from exc
    except Image.DecompressionBombError as exc:
        raise ImageTooLarge(f"the {what} exceeds Pillow's decompression-bomb limit ({exc})") from exc
    except (OSError, ValueError, SyntaxError) as exc:
        raise ImageUnreadable(f"the {what} cannot be decoded ({exc})") from exc


def _eight_bit(image: Image.Image) -> Image.Image:
    """A 16-bit grey image (Pillow I;16*, or I from a PNG, as older Pillow reads them) as 8-bit L, else `image`.

    A 16-bit sample v is v/65535 of full scale (the PNG specification), so it becomes round(v x 255 / 65535).
    Pillow's convert('RGB') clips at 255 instead: every value from 255 up, 1/257 of full scale, was sent as white.
    """
    if not (image.mode.startswith("I;16") or (image.mode == "I" and image.format == "PNG")):
        return image
    values = np.clip(np.asarray(image).astype(np.int64), 0, 65535)
    return Image.fromarray(((values * 255 + 32767) // 65535).astype(np.uint8), "L")


def _on_white(image: Image.Image) -> Image.Image:
    """An image with an alpha channel or a transparent colour (a palette's or a tRNS colour key) composited on
    white, else `image`: what the build does to its sources and vLLM to an RGBA upload (rgba_to_rgb, white).
    convert('RGB') drops alpha instead, sending a fully transparent pixel as whatever colour it stores."""
    if image.mode not in ("RGBA", "LA", "PA", "RGBa", "La") and image.info.get("transparency") is None:
        return image
    rgba = image.convert("RGBA")
    flat = Image.new("RGB", image.size, (255, 255, 255))
    flat.paste(rgba, mask=rgba.getchannel("A"))
    return flat


def prepare_image(png: bytes, entry: ModelEntry, *, boxes: list[list[float]] | None = None,
                  mask_png: bytes | None = None) -> PreparedImage:
    """Resize, draw the ROI, pad and encode an image for `entry`.

    `boxes` (original pixels) are drawn for box-grounded rows, `mask_png` outlined for
    mask-grounded rows. Raises :class:`ImageTooLarge` when the limits cannot be met and
    :class:`ImageUnreadable` for bytes that do not decode and for a mask that is empty or of another size.
    """
    unchanged = _as_is(png, entry) if not boxes and mask_png is None else None
    if unchanged is not None:
        return unchanged
    decoded = _on_white(_eight_bit(_decode(png, "image")))
    frames = plan_frames(decoded.size, entry)
    # A grey image the model sees without ROI or padding is resized and sent as grey: servers read it
    # as RGB with three equal channels, and Pillow resamples each band alike, so the model gets the
    # same pixels for a third of the resize and encode work (tests/benchmark_eval/test_images_fast.py).
    stays_grey = decoded.mode == "L" and not boxes and mask_png is None and frames.sent_size == frames.content_size
    # (an RGB image is used as decoded: convert() would copy it, ~1 ms of a 1024x768 row's resize step)
    image = decoded if stays_grey or decoded.mode == "RGB" else decoded.convert("RGB")
    content = image if frames.content_size == image.size else image.resize(frames.content_size, Image.Resampling.BICUBIC)
    if boxes:
        # exact scale: in floats 1500 x 840/3000 is 420.00000000000006, whose ceiling put a pixel between box and outline
        sx, sy = Fraction(frames.content_size[0], image.size[0]), Fraction(frames.content_size[1], image.size[1])
        content = draw_boxes(content, [(Fraction(x1) * sx, Fraction(y1) * sy, Fraction(x2) * sx, Fraction(y2) * sy)
                                       for x1, y1, x2, y2 in boxes])
    if mask_png is not None:
        mask = _decode(mask_png, "mask").convert("L")
        if mask.size != image.size:
            raise ImageUnreadable(f"the mask is {mask.size[0]}x{mask.size[1]} but the image is {image.size[0]}x{image.size[1]}")
        region = mask_region(mask, frames.content_size)  # empty only when the mask is: every touched pixel is kept
        if not region.any():  # else the image goes out with no outline under a question that names one
            raise ImageUnreadable("the mask is empty (every pixel 0): there is no region to outline")
        if region.shape != (content.size[1], content.size[0]):
            raise ImageUnreadable(f"the mask is {region.shape[1]}x{region.shape[0]} but the image is "
                                  f"{content.size[0]}x{content.size[1]}")
        content = draw_mask_outline(content, region)
    canvas = content
    if frames.sent_size != frames.content_size:
        pad = entry.image.square_pad
        canvas = Image.new("RGB", frames.sent_size, pad.fill if pad else (0, 0, 0))
        canvas.paste(content, frames.content_offset)
    data, mime = _encode(canvas, entry.image)
    return PreparedImage(data, mime, frames)


def _as_is(png: bytes, entry: ModelEntry) -> PreparedImage | None:
    """The release's own PNG when the model would see exactly its pixels (no resize, ROI or padding).

    Decoding and re-encoding it would send the same pixels at the cost of most of a request's
    client CPU. Only 8-bit grey or RGB PNGs within the byte limit qualify (servers read grey as
    RGB); anything else, or a header that does not verify, takes the full path (which also
    reports unreadable images).
    """
    if entry.image.encoding != "png" or (entry.image.max_bytes is not None and len(png) > entry.image.max_bytes):
        return None
    try:
        with Image.open(io.BytesIO(png)) as image:
            if image.format != "PNG" or image.mode not in ("L", "RGB") or image.info.get("transparency") is not None:
                return None
            frames = plan_frames(image.size, entry)
            if frames.content_size != image.size or frames.sent_size != image.size:
                return None
            image.verify()  # chunk CRCs: a damaged file goes the full path and is reported there
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError, ImageTooLarge):
        return None
    return PreparedImage(png, "image/png", frames)


def _encode(image: Image.Image, limits: ImageLimits) -> tuple[bytes, str]:
    if limits.encoding == "png":
        data = encode_png_fast(image)
        if limits.max_bytes is None or len(data) <= limits.max_bytes:
            return data, "image/png"
    for quality in JPEG_QUALITIES:
        buffer = io.BytesIO()
        image.save(buffer, format="JPEG", quality=quality)
        data = buffer.getvalue()
        if limits.max_bytes is None or len(data) <= limits.max_bytes:
            return data, "image/jpeg"
    raise ImageTooLarge(f"the encoded image is {len(data)} bytes even as JPEG quality {JPEG_QUALITIES[-1]}; "
                        f"the limit is {limits.max_bytes}")


def encode_png_fast(image: Image.Image) -> bytes:
    """An 8-bit L or RGB image as PNG, for speed over size: it only crosses a socket, once per request.

    libpng (imagecodecs) at zlib level 1 with the RLE strategy and every row Sub-filtered, OpenCV's
    fast settings: a third to a sixth of the CPU of Pillow at level 1 (whose adaptive filter tries
    five filters per row), for files 0-8 % larger (benchmarks/RESULTS.md, "Eval runner: image
    preparation"). Lossless, so the model sees the same pixels either way.
    """
    import imagecodecs  # here: ~0.1 s of import that runs whose images are all sent as they are never need

    return imagecodecs.png_encode(np.asarray(image), level=1, strategy=imagecodecs.PNG.STRATEGY.RLE,
                                  filter=imagecodecs.PNG.FILTER.SUB)
