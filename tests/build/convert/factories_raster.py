"""Raster test images written by Pillow, with EXIF orientation, ICC profiles and 16-bit data."""
from __future__ import annotations

import io
import shutil
import struct
import subprocess
import zipfile
from pathlib import Path

import numpy as np
from PIL import Image

# A real RGB display profile shipped in pydicom's wheel (its test data): "Crayon Colours"
ICC_SAMPLE = Path(__import__("pydicom").__file__).parent / "data" / "test_files" / "crayons.icc"


def io_bytes(data: bytes) -> io.BytesIO:
    return io.BytesIO(data)


def write_jpeg_with_orientation(path: Path, orientation: int, size: tuple[int, int] = (40, 20)) -> Path:
    """A `size` (width, height) JPEG, grey with a red 10x10 marker in the stored top-left corner."""
    image = Image.new("RGB", size, (128, 128, 128))
    image.paste((230, 20, 20), (0, 0, 10, 10))
    if size[0] > 64:  # bigger images get texture so the JPEG has real entropy-coded data to cut
        noise = np.random.default_rng(0).integers(0, 255, (size[1], size[0], 3), dtype=np.uint8)
        image = Image.fromarray(noise)
    exif = Image.Exif()
    exif[0x0112] = orientation
    image.save(path, format="JPEG", quality=95, exif=exif.tobytes())
    return Path(path)


def swapped_primaries_profile() -> bytes:
    """The crayons profile (an sRGB-like matrix/TRC profile) with its red and blue colorant tags
    swapped in the tag table: a valid ICC profile whose colours differ strongly from sRGB, so a test
    can see that the conversion really happened."""
    profile = bytearray(ICC_SAMPLE.read_bytes())
    count = struct.unpack(">I", profile[128:132])[0]
    entries = {bytes(profile[132 + 12 * i: 136 + 12 * i]): 132 + 12 * i for i in range(count)}
    red, blue = entries[b"rXYZ"], entries[b"bXYZ"]
    profile[red + 4: red + 12], profile[blue + 4: blue + 12] = profile[blue + 4: blue + 12], profile[red + 4: red + 12]
    return bytes(profile)


def write_png_with_icc(path: Path) -> tuple[Path, np.ndarray, bytes]:
    """An RGB PNG carrying a non-sRGB ICC profile; returns (path, stored pixels, profile bytes)."""
    pixels = np.array([[[200, 30, 30], [30, 200, 30]], [[30, 30, 200], [220, 220, 220]]], np.uint8)
    pixels = pixels.repeat(4, axis=0).repeat(4, axis=1)
    profile = swapped_primaries_profile()
    Image.fromarray(pixels).save(path, format="PNG", icc_profile=profile)
    return Path(path), pixels, profile


def write_png16(path: Path, values: np.ndarray) -> Path:
    """A 16-bit grayscale PNG (Pillow mode I;16)."""
    Image.fromarray(values.astype(np.uint16)).save(path, format="PNG")
    return Path(path)


def write_encrypted_zip(path: Path) -> Path:
    """A password-protected zip, as found in data downloads: Info-ZIP `zip -P` when present.

    The standard library cannot encrypt, so without the `zip` tool the archive is written by `zipfile`
    and its general-purpose flag bit 0 set, which is the byte Info-ZIP writes to mark encryption.
    """
    path = Path(path)
    zip_tool = shutil.which("zip")
    member = path.with_suffix(".member.txt")
    member.write_text("x")
    try:
        if zip_tool:
            subprocess.run([zip_tool, "-q", "-j", "-P", "pw", str(path), str(member)], check=True)
        else:
            with zipfile.ZipFile(path, "w") as bundle:
                bundle.write(member, member.name)
            data = bytearray(path.read_bytes())
            data[6] |= 0x01
            path.write_bytes(bytes(data))
    finally:
        member.unlink()
    return path


def write_encrypted_pdf(path: Path) -> Path:
    """A PDF written by Pillow with an /Encrypt entry in an appended trailer (what encrypted PDFs carry)."""
    plain = io.BytesIO()
    Image.new("RGB", (8, 8)).save(plain, format="PDF")
    Path(path).write_bytes(plain.getvalue() + b"\ntrailer\n<< /Encrypt 9 0 R >>\n%%EOF\n")
    return Path(path)
