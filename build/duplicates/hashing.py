"""Perceptual hashes of release images, chosen for biomedical images (evidence: benchmarks/RESULTS.md, "Duplicates").

Each image gets two 256-bit DCT perceptual hashes (imagehash's `phash` with `hash_size=16`, i.e. the signs of the
16×16 lowest DCT frequencies of a 64×64 grey thumbnail against their median):
  * `grey`: of the luma image as it is. Survives resizing, re-encoding and colour/contrast changes of H&E tiles;
  * `equalised`: of the histogram-equalised luma. Equalisation turns any monotone intensity mapping into the same
    image, so two conversions of one DICOM or fluorescence image with different windows hash alike.
Two images are near-duplicates when either distance is small. Average and wavelet hashes were rejected on
measurement: distinct MR/CT/NM slices come within 0–4 bits under them (grey images share their mean-threshold
pattern), and 64-bit pHashes leave distinct H&E tiles 16 bits apart, too few for a threshold.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from io import BytesIO
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, ImageOps

HASH_SIZE = 16  # 16×16 = 256 bits per hash
HASH_BYTES = HASH_SIZE * HASH_SIZE // 8
THUMBNAIL = 512  # images are box-reduced to at most this side first: the hash only sees 64×64 anyway
HASH_VERSION = "phash16-grey+equalised-v2"  # part of cache keys: bump when the hashes change
# A flat image (one grey level, bare glass, an empty frame) has no structure for a perceptual hash to describe:
# every flat image hashes alike whatever its level, and near-flat ones hash noise. Below this standard deviation
# of the 64×64 grey thumbnail (in 8-bit levels) an image is matched by identical bytes only.
MIN_STRUCTURE = 2.0


@dataclass(frozen=True)
class ImageHashes:
    grey: bytes
    equalised: bytes
    sha256: str  # of the file: identical files are exact duplicates whatever their hashes say
    width: int
    height: int
    structure: float  # standard deviation of the 64×64 grey thumbnail (see MIN_STRUCTURE)


def phash_bytes(image: Image.Image) -> bytes:
    """imagehash's 256-bit pHash of `image`, packed into 32 bytes (row-major bits)."""
    import imagehash

    return np.packbits(imagehash.phash(image, hash_size=HASH_SIZE).hash.flatten()).tobytes()


def image_hashes(path: Path) -> ImageHashes:
    """Both perceptual hashes of one image file, its sha256 and size. Raises OSError/ValueError if unreadable."""
    data = Path(path).read_bytes()
    with Image.open(BytesIO(data)) as image:
        return _hashes(image, data)


def png_hashes(pixels: np.ndarray, data: bytes) -> ImageHashes:
    """`image_hashes` of a PNG the converter just wrote, from what it still holds: the (H, W) or (H, W, 3) uint8
    `pixels` it encoded (a PNG decodes to exactly these, as mode L or RGB) and the file's `data`."""
    return _hashes(Image.fromarray(pixels), data)


def _hashes(image: Image.Image, data: bytes) -> ImageHashes:
    width, height = image.size
    factor = max(1, max(width, height) // THUMBNAIL)
    grey = image.convert("L")
    if factor > 1:
        grey = grey.reduce(factor)  # a box filter: cheap, and the 64×64 thumbnail averages far more anyway
    thumbnail = np.asarray(grey.resize((64, 64), Image.Resampling.LANCZOS))  # what imagehash.phash(grey) hashes
    return ImageHashes(grey=_phash_of_thumbnail(thumbnail), equalised=phash_bytes(ImageOps.equalize(grey)),
                       sha256=hashlib.sha256(data).hexdigest(), width=width, height=height,
                       structure=float(thumbnail.astype(np.float32).std()))


def _phash_of_thumbnail(pixels: np.ndarray) -> bytes:
    """`phash_bytes(grey)` from the 64×64 LANCZOS thumbnail of `grey` (uint8) that the structure measure needs too.

    Written out because imagehash.phash makes that thumbnail itself: sharing it saves one of the three resizes
    per image. These are imagehash 4.3's own steps for hash_size=16 (img_size = 16 × highfreq_factor 4 = 64):
    scipy.fftpack's DCT along axis 0 then axis 1 of the uint8 pixels, the top-left 16×16 frequencies against
    their median (tests/build/duplicates/test_hashes_from_memory.py checks it bit for bit against imagehash).
    """
    import scipy.fftpack

    dct = scipy.fftpack.dct(scipy.fftpack.dct(pixels, axis=0), axis=1)
    low = dct[:HASH_SIZE, :HASH_SIZE]
    return np.packbits((low > np.median(low)).flatten()).tobytes()


def hashes_to_json(hashes: ImageHashes) -> dict[str, Any]:
    """The hashes as JSON (a PNG's resume record), tagged with HASH_VERSION so that hashes of another version are
    never taken for these (`hashes_from_json`)."""
    return {"version": HASH_VERSION, "grey": hashes.grey.hex(), "equalised": hashes.equalised.hex(),
            "sha256": hashes.sha256, "width": hashes.width, "height": hashes.height, "structure": hashes.structure}


def hashes_from_json(saved: Any) -> ImageHashes | None:
    """The hashes `hashes_to_json` wrote, or None when `saved` is missing, of another HASH_VERSION or torn."""
    if not isinstance(saved, dict) or saved.get("version") != HASH_VERSION:
        return None
    try:
        return ImageHashes(grey=bytes.fromhex(saved["grey"]), equalised=bytes.fromhex(saved["equalised"]),
                           sha256=str(saved["sha256"]), width=int(saved["width"]), height=int(saved["height"]),
                           structure=float(saved["structure"]))
    except (KeyError, TypeError, ValueError):
        return None


def hamming(a: bytes, b: bytes) -> int:
    return int(np.unpackbits(np.frombuffer(a, np.uint8) ^ np.frombuffer(b, np.uint8)).sum())
