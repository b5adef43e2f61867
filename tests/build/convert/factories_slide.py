"""Slides and TIFFs written by the real writers (tifffile, Pillow) in the layouts openslide expects.

* `write_pyramid_tiff`: a tiled generic pyramidal TIFF, each level a distinct flat colour so a
  test can tell from the pixels which level was read.
* `write_single_level_tiff`: a large single-level tiled TIFF, generated tile by tile (the writer
  never holds the image), JPEG-compressed so it stays small on disk.
* `write_sparse_tiff`: a tiled TIFF with never-written (empty) tiles: transparent to openslide.
* `write_ndpi`: a TIFF carrying the Hamamatsu NDPI tags openslide's `hamamatsu_ndpi_detect` and
  `hamamatsu_ndpi_open` look for (65420 format flag, 65421 source lens, 65424 focal plane), one
  JPEG strip per level (rows per strip = height), largest level first.
* `write_mrxs`: the smallest MIRAX slide openslide's vendor-mirax.c accepts: `NAME.mrxs` (content
  unused) + `NAME/Slidedat.ini` + `NAME/Index.dat` + `NAME/Data0000.dat` (concatenated JPEGs).
* `write_ome_tiff`: multi-channel OME-TIFF with channel names/colours and an optional pyramid.
"""
from __future__ import annotations

import io
import struct
import uuid
import zlib
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import tifffile
from PIL import Image

LEVEL_COLOURS = [(200, 40, 40), (40, 200, 40), (40, 40, 200), (200, 200, 40), (40, 200, 200)]


def write_pyramid_tiff(path: Path, size: tuple[int, int] = (4096, 3072), levels: int = 4, tile: int = 256) -> Path:
    """Generic tiled pyramid: level k is (size / 2**k) filled with LEVEL_COLOURS[k]."""
    width, height = size
    with tifffile.TiffWriter(path, bigtiff=False) as writer:
        for level in range(levels):
            w, h = max(1, width >> level), max(1, height >> level)
            plane = np.empty((h, w, 3), np.uint8)
            plane[:] = LEVEL_COLOURS[level]
            writer.write(
                plane,
                photometric="rgb",
                tile=(tile, tile),
                compression="jpeg",
                subfiletype=1 if level else 0,
                resolution=(1e4 / (0.25 * 2**level), 1e4 / (0.25 * 2**level)),
                resolutionunit="CENTIMETER",
            )
    return Path(path)


def write_single_level_tiff(path: Path, size: int, tile: int = 512) -> Path:
    """One tiled level of `size`², a left half red and right half blue, written tile by tile."""
    left = np.empty((tile, tile, 3), np.uint8)
    left[:] = (220, 30, 30)
    right = np.empty((tile, tile, 3), np.uint8)
    right[:] = (30, 30, 220)
    tiles_across = -(-size // tile)

    def tiles() -> Iterator[np.ndarray]:
        for _row in range(tiles_across):
            for column in range(tiles_across):
                yield left if column * tile < size // 2 else right

    tifffile.imwrite(
        path,
        tiles(),
        shape=(size, size, 3),
        dtype=np.uint8,
        photometric="rgb",
        tile=(tile, tile),
        compression="jpeg",
        bigtiff=True,
    )
    return Path(path)


def write_sparse_tiff(path: Path, size: int = 256, tile: int = 64, empty: Sequence[int] = (5,)) -> Path:
    """A tiled RGB TIFF (red tiles, deflate) whose tiles numbered in `empty` were never written.

    A sparse TIFF marks them with offset and byte count 0; openslide returns them transparent.
    """
    encoded = zlib.compress(np.full((tile, tile, 3), (200, 50, 50), np.uint8).tobytes())
    count = (size // tile) ** 2
    tifffile.imwrite(
        path,
        (b"" if index in empty else encoded for index in range(count)),
        shape=(size, size, 3),
        dtype=np.uint8,
        photometric="rgb",
        tile=(tile, tile),
        compression="zlib",
    )
    return Path(path)


def write_ndpi(path: Path, base: np.ndarray, levels: int = 3, mpp: float = 0.5) -> Path:
    """A Hamamatsu NDPI as openslide detects it: NDPI tags plus one JPEG strip per pyramid level."""
    with tifffile.TiffWriter(path) as writer:
        for level in range(levels):
            plane = np.ascontiguousarray(base[:: 2**level, :: 2**level])
            writer.write(
                plane,
                photometric="rgb",
                compression="jpeg",
                rowsperstrip=plane.shape[0],
                resolution=(1e4 / (mpp * 2**level), 1e4 / (mpp * 2**level)),
                resolutionunit="CENTIMETER",
                extratags=[
                    (65420, "I", 1, 1, True),  # NDPI_FORMAT_FLAG: detection
                    (65421, "f", 1, 20.0, True),  # NDPI_SOURCELENS > 0: a pyramid level
                    (65424, "i", 1, 0, True),  # NDPI_FOCAL_PLANE 0: the in-focus plane
                ],
            )
    return Path(path)


def quadrant_image(tile: int) -> np.ndarray:
    """A (2*tile)² RGB image with four differently coloured quadrants (red, green / blue, yellow)."""
    image = np.empty((2 * tile, 2 * tile, 3), np.uint8)
    image[:tile, :tile] = (220, 40, 40)
    image[:tile, tile:] = (40, 220, 40)
    image[tile:, :tile] = (40, 40, 220)
    image[tile:, tile:] = (220, 220, 40)
    return image


def _jpeg(pixels: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, "JPEG", quality=95)
    return buffer.getvalue()


def write_mrxs(
    folder: Path,
    name: str = "slide",
    tile: int = 256,
    missing: Sequence[tuple[int, int]] = (),
    fill_rgb: tuple[int, int, int] = (240, 240, 240),
) -> Path:
    """A 2×2-image MIRAX slide with two zoom levels; `missing` level-0 images (x, y) are left out.

    Layout read by openslide's vendor-mirax.c: Slidedat.ini [GENERAL] (SLIDE_ID, IMAGENUMBER_X/Y),
    [HIERARCHICAL] (one "Slide zoom level" hierarchy with one section per level, no non-hier
    records, so positions come from the image size and zero overlap), [DATAFILE]; Index.dat =
    "01.02" + SLIDE_ID, then the hier-root pointer, the nonhier-root pointer, one pointer per level
    to [0, page pointer], each page = [record count, next page = 0] + records of
    (image index, offset, length, data file number).
    """
    folder = Path(folder)
    data_dir = folder / name
    data_dir.mkdir(parents=True, exist_ok=True)
    base = quadrant_image(tile)
    slide_id = uuid.uuid4().hex
    data = bytearray()
    records: list[list[tuple[int, int, int, int]]] = [[], []]
    for y in range(2):
        for x in range(2):
            if (x, y) in missing:
                continue
            blob = _jpeg(base[y * tile : (y + 1) * tile, x * tile : (x + 1) * tile])
            records[0].append((y * 2 + x, len(data), len(blob), 0))
            data += blob
    blob = _jpeg(np.asarray(Image.fromarray(base).reduce(2)))
    records[1].append((0, len(data), len(blob), 0))
    data += blob
    (data_dir / "Data0000.dat").write_bytes(bytes(data))

    index = bytearray(b"01.02" + slide_id.encode())
    roots = len(index)
    index += b"\0" * 8  # hier root pointer, nonhier root pointer
    hier_table = len(index)
    index += b"\0" * 4 * len(records)
    nonhier_table = len(index)
    index += b"\0" * 4
    struct.pack_into("<ii", index, roots, hier_table, nonhier_table)
    for level, level_records in enumerate(records):
        page_list = len(index)
        index += struct.pack("<ii", 0, len(index) + 8)
        index += struct.pack("<ii", len(level_records), 0)
        for record in level_records:
            index += struct.pack("<iiii", *record)
        struct.pack_into("<i", index, hier_table + 4 * level, page_list)
    (data_dir / "Index.dat").write_bytes(bytes(index))

    red, green, blue = fill_rgb
    sections = "".join(
        f"\n[LEVEL_{level}_SECTION]\nOVERLAP_X=0\nOVERLAP_Y=0\n"
        f"MICROMETER_PER_PIXEL_X={0.25 * 2**level}\nMICROMETER_PER_PIXEL_Y={0.25 * 2**level}\n"
        f"IMAGE_FORMAT=JPEG\nIMAGE_FILL_COLOR_BGR={(blue << 16) | (green << 8) | red}\n"
        f"DIGITIZER_WIDTH={tile}\nDIGITIZER_HEIGHT={tile}\nIMAGE_CONCAT_FACTOR={min(level, 1)}\n"
        for level in range(len(records))
    )
    (data_dir / "Slidedat.ini").write_text(
        "[GENERAL]\nSLIDE_VERSION=01.02\n"
        f"SLIDE_ID={slide_id}\nIMAGENUMBER_X=2\nIMAGENUMBER_Y=2\nOBJECTIVE_MAGNIFICATION=20\n"
        "CameraImageDivisionsPerSide=1\n\n"
        "[HIERARCHICAL]\nHIER_COUNT=1\nNONHIER_COUNT=0\nINDEXFILE=Index.dat\n"
        f"HIER_0_NAME=Slide zoom level\nHIER_0_COUNT={len(records)}\n"
        + "".join(f"HIER_0_VAL_{level}_SECTION=LEVEL_{level}_SECTION\n" for level in range(len(records)))
        + "\n[DATAFILE]\nFILE_COUNT=1\nFILE_0=Data0000.dat\n"
        + sections
    )
    slide_file = folder / f"{name}.mrxs"
    slide_file.write_bytes(b"")  # openslide only needs it to exist; everything lives in the folder
    return slide_file


def write_ome_tiff(
    path: Path,
    channels: np.ndarray,
    names: Sequence[str] | None,
    colours: Sequence[tuple[int, int, int]] | None,
    axes: str = "CYX",
    pyramid: Sequence[np.ndarray] = (),
) -> Path:
    """OME-TIFF with OME Channel Name/Color (RGBA packed as a signed int32, as OME stores it).

    `pyramid` holds the reduced levels (stored as SubIFDs, the OME pyramid layout); they may hold
    different content from the base so a test can tell which level was read.
    """
    metadata: dict = {"axes": axes}
    channel_meta: dict = {}
    if names is not None:
        channel_meta["Name"] = list(names)
    if colours is not None:
        channel_meta["Color"] = [_ome_colour(colour) for colour in colours]
    if channel_meta:
        metadata["Channel"] = channel_meta
    tile = (64, 64)
    with tifffile.TiffWriter(path, ome=True) as writer:
        writer.write(channels, metadata=metadata, tile=tile, subifds=len(pyramid))
        for level in pyramid:
            writer.write(np.ascontiguousarray(level), subfiletype=1, tile=tile)
    return Path(path)


def _ome_colour(rgb: tuple[int, int, int]) -> int:
    red, green, blue = rgb
    packed = (red << 24) | (green << 16) | (blue << 8) | 255
    return packed - (1 << 32) if packed >= 1 << 31 else packed
