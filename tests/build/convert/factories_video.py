"""Videos written by PyAV (FFmpeg's encoders): every frame shows its own index, so a test can tell
which frame a converter decoded, through lossy codecs too."""
from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import av
import numpy as np

WIDTH, HEIGHT = 96, 64


def frame_picture(index: int, grey: bool = False) -> np.ndarray:
    """A flat frame whose brightness is 20 + 8 * index (mod 200) with a white bar at column 4 * (index % 20)."""
    level = 20 + (8 * index) % 200
    picture = np.full((HEIGHT, WIDTH, 3), level, np.uint8)
    if not grey:
        picture[..., 0] = 255 - level  # a colour cast so RGB order shows
    column = 4 * (index % 20)
    picture[:, column:column + 4] = 255
    return picture


def level_of(pixels: np.ndarray) -> float:
    """The frame brightness `frame_picture` encoded (read from the green channel, or grey)."""
    channel = pixels[..., 1] if pixels.ndim == 3 else pixels
    return float(np.median(channel[:, WIDTH - 8:]))


def write_video(path: Path, frames: int = 60, fps: int = 25, codec: str = "libx264", gop: int = 12,
                grey: bool = False, faststart: bool = False, sample_aspect: Fraction | None = None) -> Path:
    """`frames` frames at `fps`; H.264 in MP4 by default (keyframe every `gop`, B-frames on).
    `sample_aspect` declares anamorphic pixels (width / height of one stored pixel)."""
    options = {"movflags": "+faststart"} if faststart else {}
    with av.open(str(path), mode="w", options=options) as container:
        stream = container.add_stream(codec, rate=fps)
        stream.width, stream.height = WIDTH, HEIGHT
        stream.pix_fmt = "yuvj420p" if codec == "mjpeg" else "yuv420p"
        stream.codec_context.gop_size = gop
        if sample_aspect:
            stream.sample_aspect_ratio = stream.codec_context.sample_aspect_ratio = sample_aspect
        if codec == "libx264":
            stream.codec_context.options = {"crf": "12", "bf": "2"}
        stream.time_base = Fraction(1, fps)
        for index in range(frames):
            frame = av.VideoFrame.from_ndarray(frame_picture(index, grey), format="rgb24")
            frame.pts = index
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return path
