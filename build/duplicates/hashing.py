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
from itertools import accumulate
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

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
    """imagehash's 256-bit pHash of `image`, packed into 32 bytes (row-major bits). The benchmarks' reference: the
    build computes the same bits for both of its hashes at once (`hash_thumbnails`, `_phash_bits`)."""
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
    grey = image if image.mode == "L" else image.convert("L")  # convert("L") of an L image is a needless copy
    if factor > 1:
        grey = grey.reduce(factor)  # a box filter: cheap, and the 64×64 thumbnail averages far more anyway
    thumbnails = hash_thumbnails(grey)
    bits = _phash_bits(thumbnails)
    return ImageHashes(grey=bits[0].tobytes(), equalised=bits[1].tobytes(), sha256=hashlib.sha256(data).hexdigest(),
                       width=width, height=height, structure=float(thumbnails[0].astype(np.float32).std()))


def hash_thumbnails(grey: Image.Image) -> np.ndarray:
    """The 64×64 LANCZOS thumbnails of the L image `grey` and of ImageOps.equalize(grey), the ones imagehash.phash
    makes (2 × 64 × 64 uint8), for two thirds of the cost of those calls: this runs on every release image.

    Pillow resamples every band of an 8-bit image with the same integer kernel, so the two bands of one "La"
    thumbnail are exactly the two one-band thumbnails, and the kernel is computed once ("La", not "LA": resize
    premultiplies "LA" by its alpha band first)."""
    lut = equalize_lut(grey.histogram())
    equalised = grey if lut is None else grey.point(lut)
    both = Image.merge("La", (grey, equalised)).resize((64, 64), Image.Resampling.LANCZOS)
    return np.asarray(both).transpose(2, 0, 1)


def equalize_lut(histogram: list[int]) -> list[int] | None:
    """The lookup table Pillow's ImageOps.equalize builds for a one-band image of this 256-bin `histogram`, or None
    where it maps every level to itself (at most one level used, or fewer than 255 pixels below the top level used).

    The same integers as Pillow 13's loop, lut[i] = (step // 2 + pixels below level i) // step (entries above 255
    included: Image.point clips them as equalize's own call does), for half its cost."""
    top = next((count for count in reversed(histogram) if count), 0)
    step = (sum(histogram) - top) // 255
    if not step:
        return None
    return [below // step for below in accumulate(histogram[:-1], initial=step // 2)]


def _phash_bits(thumbnails: np.ndarray) -> np.ndarray:
    """imagehash 4.3's pHash (hash_size=16) of each of the N × 64 × 64 uint8 `thumbnails`, packed: N × 32 bytes.

    imagehash's steps (img_size = 16 × highfreq_factor 4 = 64): scipy.fftpack's DCT of the uint8 pixels along the
    columns, then along the rows, the top-left 16×16 frequencies against their median. pocketfft transforms each
    line alike whatever else the array holds, so all thumbnails go in one call and the second DCT only transforms
    the 16 rows that are kept; np.median of 256 values is the mean of the middle two of the sorted values."""
    import scipy.fftpack

    rows = scipy.fftpack.dct(thumbnails, axis=1)[:, :HASH_SIZE]
    low = scipy.fftpack.dct(rows, axis=2)[:, :, :HASH_SIZE].reshape(len(thumbnails), -1)
    middle = np.sort(low, axis=1)[:, low.shape[1] // 2 - 1:low.shape[1] // 2 + 1]
    return np.packbits(low > (middle[:, :1] + middle[:, 1:]) / 2, axis=1)


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
