"""CZI fixtures written by Zeiss's own libCZI writer (pylibCZIrw), zstd-compressed like ZEN saves them."""
from __future__ import annotations

from pathlib import Path

import numpy as np
from pylibCZIrw import czi as pyczi

DISPLAY = {0: ("DAPI", (0, 0, 255)), 1: ("Cy5", (255, 0, 255))}


def _setting(colour: tuple[int, int, int]) -> pyczi.ChannelDisplaySettingsDataClass:
    tint = pyczi.Rgb8Color(*(np.uint8(v) for v in colour))
    return pyczi.ChannelDisplaySettingsDataClass(True, pyczi.TintingMode.Color, tint, 0.0, 1.0)


def write_czi(path: Path, height: int = 40, width: int = 50, scenes: int = 2, depth: int = 3) -> Path:
    """Two 16-bit channels (DAPI blue, Cy5 magenta in the display settings) × Z planes × scenes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(7)
    with pyczi.create_czi(str(path), exist_ok=True, compression_options="zstd0:ExplicitLevel=1") as writer:
        for scene in range(scenes):
            for channel in range(2):
                for z in range(depth):
                    plane = rng.integers(100, 3000, (height, width)).astype(np.uint16)
                    plane[: height // 4, : width // 4] += np.uint16(500 * (channel + 1) * (z + 1))
                    writer.write(plane, plane={"C": channel, "Z": z, "T": 0}, scene=scene,
                                 location=(scene * (width + 20), 0))
        writer.write_metadata(document_name=path.stem, channel_names={c: n for c, (n, _) in DISPLAY.items()},
                              scale_x=0.2e-6, scale_y=0.2e-6,
                              display_settings={c: _setting(colour) for c, (_, colour) in DISPLAY.items()})
    return path


def write_rgb_czi(path: Path) -> Path:
    """A brightfield-style Bgr24 image: white with a red 10×10 square at the top left."""
    rgb = np.full((30, 40, 3), 255, np.uint8)
    rgb[:10, :10] = (255, 0, 0)
    with pyczi.create_czi(str(path), exist_ok=True) as writer:
        writer.write(np.ascontiguousarray(rgb[..., ::-1]), plane={"C": 0, "Z": 0, "T": 0})  # libCZI stores BGR
    return path
