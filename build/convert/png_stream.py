"""A source PNG's own image stream, kept instead of encoding its pixels again.

An 8-bit grey or RGB PNG whose pixels the raster reader hands on unchanged (no EXIF turn, colour profile,
colour key, palette, alpha or resize) already is a PNG of those pixels: its IHDR, IDAT and IEND chunks decode to
them under any decoder, so the converter writes those chunks as they are instead of re-encoding (the encode is
a fifth of a build's conversion CPU, and most datasets ship PNGs). The ancillary chunks are dropped: text chunks
may carry names or dates, and gamma, chromaticity, ICC and physical-size chunks would make viewers show the
release PNG otherwise than the pixels the converter reported (the readers ignore them too).

Kept only when every kept chunk's CRC is intact (Pillow does not check IDAT CRCs, strict decoders refuse them) and
the image data is compressed at all (a stored PNG is encoded again, smaller).
"""
from __future__ import annotations

import struct
import zlib

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
COLOUR_TYPES = {1: 0, 3: 2}  # samples per pixel -> PNG colour type: the converter's L and RGB, grey and truecolour
_CHUNK_HEAD = struct.Struct(">I4s")
_IHDR = struct.Struct(">IIBBBBB")


def image_stream(data: bytes, width: int, height: int, channels: int) -> bytes | None:
    """`data`, a whole PNG file, reduced to its IHDR, IDAT and IEND chunks, when it is a non-interlaced 8-bit
    PNG of `width` × `height` with `channels` (1 grey, 3 RGB), its kept chunks intact and its data compressed;
    None otherwise (the caller encodes the pixels instead)."""
    view = memoryview(data)
    if view[:8] != PNG_SIGNATURE:
        return None
    kept: list[memoryview] = [view[:8]]
    position = 8
    compressed = 0
    header_seen = False
    while position + 12 <= len(view):
        length, kind = _CHUNK_HEAD.unpack_from(view, position)
        end = position + 12 + length
        if end > len(view):
            return None
        chunk = view[position:end]
        if kind in (b"IHDR", b"IDAT", b"IEND"):
            if zlib.crc32(chunk[4:-4]) != int.from_bytes(chunk[-4:], "big"):
                return None
            if kind == b"IHDR":
                if header_seen or length != _IHDR.size or \
                        _IHDR.unpack_from(chunk, 8) != (width, height, 8, COLOUR_TYPES.get(channels), 0, 0, 0):
                    return None
                header_seen = True
            elif not header_seen:
                return None
            compressed += length if kind == b"IDAT" else 0
            kept.append(chunk)
            if kind == b"IEND":
                break
        elif not kind[0] & 0x20 and kind != b"PLTE":  # an unknown critical chunk: its meaning would be lost
            return None  # (a PLTE beside grey or RGB data is only a suggested palette for small displays)
        position = end
    else:
        return None  # no IEND: a file cut short
    if compressed == 0 or compressed >= height * (width * channels + 1):  # no image data, or stored (level 0)
        return None
    return b"".join(kept)
