"""Writing PNGs safely: unique names from the source stem, atomic replace, 8-bit L or RGB only.

A PNG appears under its final name only once it is complete (temp file in the same directory, then
`os.replace`), so an interrupted batch never leaves a partial PNG a later step would trust.
"""
from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

import numpy as np
from PIL import Image

COMPOUND_SUFFIXES = (".nii.gz", ".ome.tiff", ".ome.tif", ".tar.gz")
# zlib level 4: on the DICOM benchmark mix (benchmarks/convert_dicom.py) it gives PNGs no larger than
# dcmtk/libpng's defaults while encoding 25-60 % faster than Pillow's default 6, which only saves ~1-3 %.
PNG_COMPRESS_LEVEL = 4


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


def write_png(pixels: np.ndarray, target: Path) -> None:
    """Write (H, W) or (H, W, 3) uint8 pixels as an 8-bit L or RGB PNG at `target`, atomically."""
    target.parent.mkdir(parents=True, exist_ok=True)
    if pixels.dtype != np.uint8 or not (pixels.ndim == 2 or (pixels.ndim == 3 and pixels.shape[2] == 3)):
        raise TypeError(f"PNG output is 8-bit L or RGB, got {pixels.dtype} with shape {pixels.shape}")
    image = Image.fromarray(np.ascontiguousarray(pixels))  # uint8 2-D -> "L", (H, W, 3) -> "RGB"
    handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.stem}.", suffix=".png.tmp")
    try:
        with os.fdopen(handle, "wb") as stream:
            image.save(stream, format="PNG", compress_level=PNG_COMPRESS_LEVEL)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
