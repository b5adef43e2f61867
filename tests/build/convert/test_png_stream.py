"""A source PNG's own image stream is kept only when it decodes to exactly the pixels the converter reports.

Fixtures are written by Pillow (text, pHYs, gAMA, ICC, EXIF, tRNS, palettes, 16-bit, APNG) and checked at pixel level,
the kept files also by libpng (imagecodecs), which checks every chunk's CRC where Pillow does not.
"""
from __future__ import annotations

import io
import struct
import zlib
from pathlib import Path

import imagecodecs
import numpy as np
import pytest
from PIL import Image, PngImagePlugin

from mmbu.build.convert.base import ConvertOptions
from mmbu.build.convert.batch import convert_keeping_png
from mmbu.build.convert.dispatch import read_image
from mmbu.build.convert.png_stream import PNG_SIGNATURE, image_stream
from tests.build.convert.factories_raster import write_png16, write_png_with_icc


def _texture(shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    rows, cols = np.mgrid[: shape[0], : shape[1]]
    base = (np.sin(rows / 5.0) * 60 + np.cos(cols / 7.0) * 60 + 128).astype(np.uint8)
    noise = np.random.default_rng(seed).integers(0, 8, shape, dtype=np.uint8)
    return (base if len(shape) == 2 else base[..., None]) + noise


def _chunks(data: bytes) -> list[bytes]:
    kinds, position = [], 8
    while position < len(data):
        length, kind = struct.unpack_from(">I4s", data, position)
        kinds.append(kind)
        position += 12 + length
    return kinds


def _with_chunk(data: bytes, kind: bytes, body: bytes, before: bytes = b"IDAT") -> bytes:
    """`data` with a chunk inserted before the first `before` chunk (CRC computed)."""
    chunk = struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
    at = data.index(before) - 4
    return data[:at] + chunk + data[at:]


@pytest.mark.parametrize("shape", [(37, 53), (40, 31, 3)])
def test_a_plain_png_keeps_its_stream_without_ancillary_chunks(tmp_path: Path, shape):
    pixels = _texture(shape)
    info = PngImagePlugin.PngInfo()
    info.add_text("PatientName", "Doe^Jane")  # what a text chunk of a medical PNG may carry
    source = tmp_path / "source.png"
    Image.fromarray(pixels).save(source, pnginfo=info, dpi=(300, 300))
    assert {b"tEXt", b"pHYs"} <= set(_chunks(source.read_bytes()))

    converted = read_image(source, ConvertOptions())
    assert converted.png is not None and converted.params["png_stream"].startswith("kept from the source")
    assert _chunks(converted.png) == [b"IHDR"] + [b"IDAT"] * (len(_chunks(converted.png)) - 2) + [b"IEND"]
    assert b"Doe^Jane" not in converted.png
    np.testing.assert_array_equal(converted.pixels, pixels)
    np.testing.assert_array_equal(np.asarray(Image.open(io.BytesIO(converted.png))), pixels)
    np.testing.assert_array_equal(imagecodecs.png_decode(converted.png), pixels)

    result = convert_keeping_png(source, tmp_path / "out.png", ConvertOptions())
    assert (tmp_path / "out.png").read_bytes() == result.data == converted.png
    assert result.record["params"]["png_stream"].startswith("kept from the source")


def _assert_encoded_again(source: Path, tmp_path: Path, expected: np.ndarray) -> None:
    converted = read_image(source, ConvertOptions())
    assert converted.png is None and "png_stream" not in converted.params
    result = convert_keeping_png(source, tmp_path / "out.png", ConvertOptions())
    assert result.record["status"] == "ok"
    np.testing.assert_array_equal(imagecodecs.png_decode((tmp_path / "out.png").read_bytes()), expected)


def test_pixel_changing_steps_encode_again(tmp_path: Path):
    # EXIF orientation 6: the pixels are turned, the stored stream is not
    pixels = _texture((20, 30, 3))
    exif = Image.Exif()
    exif[0x0112] = 6
    Image.fromarray(pixels).save(tmp_path / "turned.png", exif=exif.tobytes())
    _assert_encoded_again(tmp_path / "turned.png", tmp_path, np.rot90(pixels, k=-1))

    # an ICC profile converted to sRGB
    path, _, _ = write_png_with_icc(tmp_path / "icc.png")
    _assert_encoded_again(path, tmp_path, read_image(path, ConvertOptions()).pixels)

    # a grey colour key (tRNS): composited on white
    grey = _texture((16, 16))
    Image.fromarray(grey).save(tmp_path / "keyed.png", transparency=int(grey[0, 0]))
    expected = np.where(grey == grey[0, 0], 255, grey).astype(np.uint8)
    _assert_encoded_again(tmp_path / "keyed.png", tmp_path, expected)

    # a palette image, 16-bit grey, RGBA
    Image.fromarray(pixels).convert("P").save(tmp_path / "palette.png")
    palette_pixels = np.asarray(Image.open(tmp_path / "palette.png").convert("RGB"))
    _assert_encoded_again(tmp_path / "palette.png", tmp_path, palette_pixels)
    write_png16(tmp_path / "deep.png", np.arange(400).reshape(20, 20) * 100)
    _assert_encoded_again(tmp_path / "deep.png", tmp_path, read_image(tmp_path / "deep.png", ConvertOptions()).pixels)
    Image.fromarray(np.dstack([pixels, np.full(pixels.shape[:2], 255, np.uint8)])).save(tmp_path / "rgba.png")
    _assert_encoded_again(tmp_path / "rgba.png", tmp_path, pixels)


def test_a_resize_or_a_mask_encodes_again(tmp_path: Path):
    pixels = _texture((64, 48))
    Image.fromarray(pixels).save(tmp_path / "big.png")
    shrunk = read_image(tmp_path / "big.png", ConvertOptions(max_size=32))
    assert shrunk.png is None and shrunk.pixels.shape == (32, 24)
    unchanged = read_image(tmp_path / "big.png", ConvertOptions(max_size=64))  # already within: nothing resized
    assert unchanged.png is not None
    Image.fromarray((pixels > 128).astype(np.uint8)).save(tmp_path / "mask.png")
    assert read_image(tmp_path / "mask.png", ConvertOptions(as_mask=True)).png is None


def test_a_broken_idat_crc_is_encoded_again_as_a_valid_png(tmp_path: Path):
    pixels = _texture((24, 24, 3))
    Image.fromarray(pixels).save(tmp_path / "good.png")
    data = bytearray((tmp_path / "good.png").read_bytes())
    iend = data.index(b"IEND") - 4
    data[iend - 1] ^= 0xFF  # the last IDAT's CRC: Pillow does not check it, libpng refuses the file
    (tmp_path / "bad-crc.png").write_bytes(bytes(data))
    with pytest.raises(Exception):
        imagecodecs.png_decode(bytes(data))
    _assert_encoded_again(tmp_path / "bad-crc.png", tmp_path, pixels)


def test_a_stored_png_is_encoded_again_smaller(tmp_path: Path):
    pixels = _texture((64, 64))
    Image.fromarray(pixels).save(tmp_path / "stored.png", compress_level=0)
    _assert_encoded_again(tmp_path / "stored.png", tmp_path, pixels)
    assert (tmp_path / "out.png").stat().st_size < (tmp_path / "stored.png").stat().st_size


def test_an_animated_png_is_encoded_again(tmp_path: Path):
    frames = [Image.fromarray(_texture((16, 16, 3), seed)) for seed in range(2)]
    frames[0].save(tmp_path / "anim.png", save_all=True, append_images=frames[1:])
    converted = read_image(tmp_path / "anim.png", ConvertOptions())
    assert converted.frame == 0 and converted.png is None


def _plain(shape: tuple[int, ...]) -> tuple[bytes, int, int, int]:
    pixels = _texture(shape)
    buffer = io.BytesIO(b"")
    Image.fromarray(pixels).save(buffer, format="PNG")
    return buffer.getvalue(), shape[1], shape[0], 1 if len(shape) == 2 else 3


def test_image_stream_refuses_what_it_cannot_vouch_for():
    data, width, height, channels = _plain((10, 12, 3))
    assert image_stream(data, width, height, channels) is not None
    assert image_stream(data, width + 1, height, channels) is None  # not the pixels' size
    assert image_stream(data, width, height, 1) is None  # not the pixels' channels
    assert image_stream(data[:-12], width, height, channels) is None  # IEND missing: cut short
    assert image_stream(data[:40], width, height, channels) is None  # cut inside a chunk
    assert image_stream(b"GIF89a" + data[6:], width, height, channels) is None
    assert image_stream(_with_chunk(data, b"ABCD", b"x"), width, height, channels) is None  # unknown critical
    interlaced = bytearray(data)
    interlaced[28] = 1  # IHDR's interlace byte (8 signature + 8 chunk head + 12)
    interlaced[29:33] = struct.pack(">I", zlib.crc32(bytes(interlaced[12:29])))
    assert image_stream(bytes(interlaced), width, height, channels) is None


def test_image_stream_drops_a_suggested_palette_and_ancillary_chunks():
    data, width, height, channels = _plain((10, 12, 3))
    decorated = _with_chunk(_with_chunk(data, b"PLTE", bytes(range(6))), b"tIME", b"\x07\xea\x0c\x02\x00\x00\x00")
    decorated = _with_chunk(decorated, b"zzZZ", b"trailing ancillary", before=b"IEND")
    kept = image_stream(decorated, width, height, channels)
    assert kept == image_stream(data, width, height, channels)
    assert kept.startswith(PNG_SIGNATURE) and _chunks(kept) == [b"IHDR", b"IDAT", b"IEND"]
