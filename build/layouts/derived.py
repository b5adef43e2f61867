"""Samples that are not files of the dataset: a slice of a NumPy stack, an image cell of a Parquet table,
an instance mask assembled from per-object files or drawn from polygons.

Decision: the layout writes each such image or mask **once, losslessly, as a file** in the dataset's
layout cache (`$MMBU_DATA/work/<id>/layout-cache/`), and the sample points at it; the converter and
every later step stay file-based and unchanged. Each file is named by its sample id and has a
sidecar (`<file>.json`) recording the identity of what it was made from: the source file's path,
size and mtime, the member/row/index, and `RECIPE`. A rebuild rewrites a file only when that identity
changed, so the file keeps its mtime and the converter's PNG cache (keyed on source size and mtime)
is reused; a layout step killed half-way resumes with the files already written. Writes are atomic.

Encoding (nothing is rounded or windowed here; the converter does the display steps):
- uint8 grey or RGB(A), uint16 grey, and bool: PNG (bool as 0/255).
- floats whose every value is a whole number in 0..255 (PanNuke's `images.npy` is float64): 8-bit PNG;
  that is lossless, and recorded in the sidecar as `cast`.
- every other array (int32, other floats, two-channel): TIFF with deflate compression, dtype kept.
- bytes that already are an encoded image (a Parquet `{bytes, path}` cell): written as they are, with
  the suffix their content says.
"""
from __future__ import annotations

import io
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from mmbu.core.files import write_bytes_atomic

RECIPE = 1  # bump when the bytes written for the same source would change


class DerivedImageError(ValueError):
    """An array or a byte string that cannot become an image file; the message is one sentence."""


def source_identity(path: Path, **where: Any) -> dict[str, Any]:
    """What a derived file was made from: the source file (path, size, mtime) and where inside it."""
    stat = path.stat()
    return {"source": str(path), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "recipe": RECIPE, **where}


def encode_array(array: np.ndarray, *, is_mask: bool = False) -> tuple[bytes, str, dict[str, str]]:
    """(file bytes, suffix, notes) of a lossless file holding `array` ((H, W) or (H, W, C))."""
    if array.ndim == 3 and array.shape[-1] == 1:
        array = array[..., 0]
    if array.ndim not in (2, 3) or (array.ndim == 3 and array.shape[-1] > 4) or 0 in array.shape:
        raise DerivedImageError(f"an array of shape {tuple(array.shape)} is not an image "
                                "(height x width, optionally with up to 4 channels last)")
    notes: dict[str, str] = {"dtype": str(array.dtype), "shape": "x".join(map(str, array.shape))}
    if array.dtype == bool:
        array = np.where(array, 255, 0).astype(np.uint8)
        notes["cast"] = "bool stored as 0/255"
    elif array.dtype.kind == "f" and not is_mask and _whole_bytes(array):
        array = array.astype(np.uint8)
        notes["cast"] = f"{notes['dtype']} holding whole values 0-255 stored as 8-bit (lossless)"
    elif is_mask and array.dtype.kind in "iuf" and array.ndim == 2 and _whole_labels(array):
        array = array.astype(np.uint8 if array.max(initial=0) < 256 else np.uint16)
    if array.dtype == np.uint8 and (array.ndim == 2 or array.shape[-1] in (3, 4)):
        return _png(array), ".png", notes
    if array.dtype == np.uint16 and array.ndim == 2:
        return _png(array), ".png", notes
    import tifffile

    buffer = io.BytesIO()
    tifffile.imwrite(buffer, np.ascontiguousarray(array), compression="zlib", metadata=None)
    return buffer.getvalue(), ".tif", notes


def _whole_bytes(array: np.ndarray) -> bool:
    finite = np.isfinite(array).all()
    return bool(finite and array.min(initial=0) >= 0 and array.max(initial=0) <= 255 and (array == np.rint(array)).all())


def _whole_labels(array: np.ndarray) -> bool:
    if array.dtype.kind == "f" and not (np.isfinite(array).all() and (array == np.rint(array)).all()):
        return False
    return bool(array.min(initial=0) >= 0 and array.max(initial=0) < 65536)


def _png(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(array).save(buffer, format="PNG", compress_level=1)  # fast; PNG is lossless at every level
    return buffer.getvalue()


def image_suffix(data: bytes) -> str:
    """The suffix for encoded image bytes, from their content (never from a name the source gives)."""
    try:
        with Image.open(io.BytesIO(data)) as image:
            return {"JPEG": ".jpg", "PNG": ".png", "TIFF": ".tif", "BMP": ".bmp", "GIF": ".gif",
                    "WEBP": ".webp", "JPEG2000": ".jp2"}.get(image.format or "", f".{(image.format or 'img').lower()}")
    except Exception as exc:  # noqa: BLE001 - Pillow raises several types for bytes that are not an image
        if data[128:132] == b"DICM":
            return ".dcm"
        raise DerivedImageError(f"the bytes are not an image Pillow can open ({type(exc).__name__})") from None


class DerivedFiles:
    """The layout cache of one dataset: derived images and masks, each written once per source identity."""

    def __init__(self, cache_dir: Path) -> None:
        self.cache_dir = Path(cache_dir)

    def cached(self, kind: str, name: str, identity: Mapping[str, Any]) -> tuple[Path, dict[str, str]] | None:
        """The cached file and its notes when it was made from exactly `identity`, else None."""
        sidecar = self.cache_dir / kind / f"{name}.json"
        try:
            saved = json.loads(sidecar.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        path = self.cache_dir / kind / str(saved.get("file", ""))
        if saved.get("identity") == json.loads(json.dumps(identity, default=str)) and path.is_file():
            return path, saved.get("notes", {})
        return None

    def write(self, kind: str, name: str, identity: Mapping[str, Any], payload: np.ndarray | bytes,
              *, is_mask: bool = False) -> tuple[Path, dict[str, str]]:
        """Store an array (encoded losslessly) or already-encoded image bytes (as they are)."""
        if isinstance(payload, bytes):
            data, suffix, notes = payload, image_suffix(payload), {"stored": "the source's own encoded bytes"}
        else:
            data, suffix, notes = encode_array(payload, is_mask=is_mask)
        path = self.cache_dir / kind / f"{name}{suffix}"
        write_bytes_atomic(path, data)
        sidecar = {"file": path.name, "identity": identity, "notes": notes}  # written last: it vouches for the file
        write_bytes_atomic(self.cache_dir / kind / f"{name}.json",
                           json.dumps(sidecar, sort_keys=True, default=str).encode("utf-8"))
        return path, notes
