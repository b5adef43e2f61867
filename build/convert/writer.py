"""Writing PNGs safely: unique names from the source stem, atomic replace, 8-bit L or RGB only.

A PNG appears under its final name only once it is complete (`mmbu.core.files.atomic_file`: temp file in
the same directory, then `os.replace`), so an interrupted batch never leaves a partial PNG a later step
would trust.

PNG encoding is lossless whatever the settings; they only trade encoding time for file size. Measured
on the converter's own outputs (benchmarks/RESULTS.md, "PNG encoder settings for converter outputs"):

* grayscale (CT, MR, radiographs): Pillow at zlib level 4. On the DICOM benchmark mix it gives PNGs
  no larger than dcmtk/libpng's defaults while encoding 25-60 % faster than Pillow's default 6; a
  fixed row filter would make noisy radiographs ~17 % larger.
* RGB (slides, photographs, ultrasound): libpng through imagecodecs, zlib level 2, every row filtered
  with "Up". Pillow tries all five filters on every row; for 2048² slide thumbnails, photographs and
  ultrasound the single "Up" filter gives files as small (-2 % to +1 %) in a third of the CPU time
  (0.15 s instead of 0.49 s for a 2048² thumbnail).
"""
from __future__ import annotations

from collections.abc import Iterable
from io import BytesIO
from pathlib import Path

import numpy as np

from mmbu.core.files import write_bytes_atomic

COMPOUND_SUFFIXES = (".nii.gz", ".ome.tiff", ".ome.tif", ".tar.gz")
GRAY_ZLIB_LEVEL = 4  # Pillow, adaptive row filters
RGB_ZLIB_LEVEL = 2  # libpng (imagecodecs), "Up" row filter


def source_stem(source: Path) -> str:
    """The name a PNG inherits: the file name without its (compound) extension; a directory keeps its name."""
    name = source.name
    if source.is_dir():
        return name
    lowered = name.lower()
    for suffix in COMPOUND_SUFFIXES:
        if lowered.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    return source.stem or name


def plan_output_names(sources: list[Path], reserved: Iterable[str] = ()) -> list[str]:
    """One PNG file name per source, in order: `stem.png`, then `stem-2.png`, `stem-3.png`, ...

    Names are decided up front, before any worker runs, so they do not depend on which worker
    finishes first and a re-run over the same sources writes the same names (replacing its earlier
    outputs instead of piling up copies). Collisions are compared case-insensitively so the set
    also stays unique on case-insensitive file systems. `reserved` names are never given out: the
    batch reserves the sources that sit in the output folder, so no output overwrites an input.
    """
    seen: dict[str, int] = {}
    taken: set[str] = {name.lower() for name in reserved}
    names = []
    for source in sources:
        stem = source_stem(source)
        count = seen.get(stem.lower(), 0)
        while True:
            count += 1
            name = f"{stem}.png" if count == 1 else f"{stem}-{count}.png"
            if name.lower() not in taken:
                break
        seen[stem.lower()] = count
        taken.add(name.lower())
        names.append(name)
    return names


def encode_png(pixels: np.ndarray) -> bytes:
    """(H, W) or (H, W, 3) uint8 pixels as the bytes of an 8-bit L or RGB PNG (settings: module docstring)."""
    if pixels.dtype != np.uint8 or not (pixels.ndim == 2 or (pixels.ndim == 3 and pixels.shape[2] == 3)):
        raise TypeError(f"PNG output is 8-bit L or RGB, got {pixels.dtype} with shape {pixels.shape}")
    pixels = np.ascontiguousarray(pixels)
    if pixels.ndim == 3:
        import imagecodecs

        return imagecodecs.png_encode(pixels, level=RGB_ZLIB_LEVEL, filter=imagecodecs.PNG.FILTER.UP)
    from PIL import Image

    buffer = BytesIO()
    Image.fromarray(pixels).save(buffer, format="PNG", compress_level=GRAY_ZLIB_LEVEL)
    return buffer.getvalue()


def write_png(pixels: np.ndarray, target: Path, *, durable: bool = True, atomic: bool = True,
              encoded: bytes | None = None) -> bytes:
    """Write (H, W) or (H, W, 3) uint8 pixels as an 8-bit L or RGB PNG at `target`, atomically; returns its bytes.
    `encoded`: a PNG of exactly these pixels already at hand (a source PNG's own stream), written instead.
    `durable=False`: without fsync, for callers that sync once for many files (mmbu.core.files). `atomic=False`:
    written in place (no temporary file and rename, a fifth of a build's conversion time on a busy disk), for
    callers that never trust the file unchecked (the build notes each PNG's size and CRC and checks them)."""
    data = encode_png(pixels) if encoded is None else encoded
    if atomic:
        write_bytes_atomic(target, data, durable=durable)
    else:
        try:
            target.write_bytes(data)
        except FileNotFoundError:  # the folder is made once, not checked before every PNG of a batch
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
    return data
