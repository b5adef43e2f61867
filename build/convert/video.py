"""Video files (MP4/MOV, AVI, MKV/WebM: endoscopy, ultrasound cine, capsule endoscopy) to one frame.

Decoded with PyAV (FFmpeg's libraries; BSD-3-Clause binding, LGPL FFmpeg in its wheels), one frame at
a time: the container is seeked to the keyframe at or before the wanted frame and decoded forward
until it, so memory holds one frame whatever the video's length, and a frame late in a long video
costs one GOP of decoding, not the whole stream.

* **Which frame.** `options.frame_time` (seconds from the stream's start): the first frame shown at
  or after that time. Else `options.frame`: an index N is the frame whose presentation time is
  N / average frame rate from the start (for constant-rate video exactly the N-th frame, as
  `ffmpeg -vf select=eq(n\\,N)` counts); `"middle"` is N = frame count // 2 (the container's count,
  or duration × rate when it has none). A build lists several frames of one video as several
  samples (manifest `convert: video:`), each converted with its own index or time.
* **Display.** RGB from the decoder's colour conversion (`rgb24`); frames whose three channels are
  equal (grey ultrasound) become 8-bit grey. A display rotation (phone videos) is applied, and a
  non-square sample aspect ratio is made square by widening, as players show it.
* **Bad input.** A file FFmpeg cannot open (a truncated MP4 without its index), a frame past the
  end of a video that stops early, or damaged data before the frame: one sentence each.
"""
from __future__ import annotations

from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from mmbu.build.convert import display
from mmbu.build.convert.base import ConversionError, Converted, ConvertOptions, exception_summary as _cause
from mmbu.core import budget
from mmbu.core.geometry import ConversionGeometry


def read(path: Path, options: ConvertOptions) -> Converted:
    """Decode the one frame `options` asks for."""
    import av

    path = Path(path)
    if options.as_mask:
        raise ConversionError(f"{path} is a video; its frames are lossy-coded pictures, not label masks")
    try:
        container = av.open(str(path))
    except (av.error.FFmpegError, OSError) as exc:
        raise ConversionError(f"{path} is not a readable video ({_cause(exc)}); it may be truncated") from None
    with container:
        if not container.streams.video:
            raise ConversionError(f"{path} holds no video stream")
        stream = container.streams.video[0]
        stream.thread_type = "AUTO"
        try:  # the decoder allocates what the stream declares; RGB 8-bit once converted
            budget.check_plane(path, stream.codec_context.width, stream.codec_context.height, channels=3,
                               kind="video frame")
        except budget.OverBudget as exc:
            raise ConversionError(str(exc)) from None
        info = stream_info(stream, container)
        index, target_time = _target(options, info, path)
        frame, seeked = _decode_until(container, stream, info, target_time, index, path)
        pixels = frame.to_ndarray(format="rgb24")
        rotation = int(getattr(frame, "rotation", 0) or 0)
        aspect = stream.codec_context.sample_aspect_ratio  # the frame keeps none of its own in PyAV
        shown_index = _frame_index(frame, info)
        params: dict[str, Any] = {
            "decoder": f"PyAV {av.__version__} ({stream.codec_context.name})",
            "container": container.format.name,
            "codec": stream.codec_context.name,
            "fps": float(info["rate"]) if info["rate"] else None,
            "frame_count": info["frames"],
            "duration_s": info["duration"],
            "frame_choice": ("time" if options.frame_time is not None else
                             "middle" if options.frame == "middle" else "index"),
            "requested_time_s": options.frame_time,
            "frame_index": shown_index,
            "frame_time_s": round(float(frame.time), 6) if frame.time is not None else None,
            "seeked_to_keyframe": seeked,
        }
    if pixels.shape[2] == 3 and np.array_equal(pixels[..., 0], pixels[..., 1]) and np.array_equal(pixels[..., 1], pixels[..., 2]):
        pixels, params["mode"] = np.ascontiguousarray(pixels[..., 0]), "grey (R = G = B)"
    geometry = ConversionGeometry.kept((pixels.shape[1], pixels.shape[0]))  # the decoded frame as stored
    pixels, params["rotation_applied"], transpose = _rotate(pixels, rotation)
    if transpose:
        geometry = geometry.then("orient", (pixels.shape[1], pixels.shape[0]), how=transpose)
    pixels, params["sample_aspect_ratio"] = _square(pixels, aspect)
    geometry = geometry.then("square_pixels", (pixels.shape[1], pixels.shape[0]), how="lanczos")
    return Converted(pixels=np.ascontiguousarray(pixels), format="video", frame=shown_index, params=params,
                     geometry=geometry)


def stream_info(stream: Any, container: Any) -> dict[str, Any]:
    """Rate, time base, start, frame count and duration of a video stream (headers only)."""
    rate = stream.average_rate or stream.guessed_rate
    time_base = stream.time_base or Fraction(1, 1_000_000)
    start = stream.start_time or 0
    if stream.duration:
        duration = float(stream.duration * time_base)
    elif container.duration:
        duration = container.duration / 1_000_000  # av.time_base
    else:
        duration = None
    frames = int(stream.frames or 0) or (int(round(duration * float(rate))) if duration and rate else 0)
    return {"rate": rate, "time_base": time_base, "start": start, "duration": duration, "frames": frames}


def video_info(path: Path) -> dict[str, Any]:
    """What a layout needs to list frames: frame count, duration (s) and rate; headers only."""
    import av

    try:
        with av.open(str(path)) as container:
            if not container.streams.video:
                raise ConversionError(f"{path} holds no video stream")
            info = stream_info(container.streams.video[0], container)
    except av.error.FFmpegError as exc:
        raise ConversionError(f"{path} is not a readable video ({_cause(exc)}); it may be truncated") from None
    return {"frames": info["frames"], "duration": info["duration"],
            "fps": float(info["rate"]) if info["rate"] else None}


def _target(options: ConvertOptions, info: dict[str, Any], path: Path) -> tuple[int | None, float]:
    """(frame index or None, time in seconds from the stream's start) of the wanted frame."""
    rate = info["rate"]
    if options.frame_time is not None:
        if options.frame_time < 0:
            raise ConversionError(f"frame time {options.frame_time} s is negative for {path}")
        return None, float(options.frame_time)
    if not rate:
        raise ConversionError(f"{path} does not declare a frame rate, so frame {options.frame!r} cannot be located; "
                              "choose frames by time")
    if options.frame == "middle":
        if not info["frames"]:
            raise ConversionError(f"{path} declares neither a frame count nor a duration, so it has no known middle")
        index = info["frames"] // 2
    elif isinstance(options.frame, int) and options.frame >= 0:
        index = options.frame
    else:
        raise ConversionError(f"frame {options.frame!r} is not a frame index or 'middle'")
    return index, float(index / rate)


def _frame_index(frame: Any, info: dict[str, Any]) -> int | None:
    if frame.pts is None or not info["rate"]:
        return None
    return int(round(float((frame.pts - info["start"]) * info["time_base"] * info["rate"])))


def _decode_until(container: Any, stream: Any, info: dict[str, Any], target_time: float, index: int | None,
                  path: Path) -> tuple[Any, bool]:
    """Seek to the keyframe at or before the target, decode forward to the target frame."""
    import av

    time_base, start = info["time_base"], info["start"]
    target_pts = start + int(target_time / time_base)
    seeked = False
    if target_pts > start:
        try:
            container.seek(target_pts, stream=stream, backward=True, any_frame=False)
            seeked = True
        except av.error.FFmpegError:
            container.seek(0)  # an unseekable stream: decode from the start instead
    last_time = None
    try:
        for frame in container.decode(stream):
            if frame.pts is None:
                continue
            seconds = float((frame.pts - start) * time_base)
            last_time = seconds
            if index is not None:
                shown = _frame_index(frame, info)
                if shown is not None and shown >= index:
                    return frame, seeked
            elif seconds >= target_time - 1e-6:
                return frame, seeked
    except (av.error.FFmpegError, ValueError) as exc:
        where = f"after {last_time:.3f} s" if last_time is not None else "before its first frame"
        raise ConversionError(f"{path} has damaged or truncated video data {where} ({_cause(exc)})") from None
    wanted = f"frame {index}" if index is not None else f"the frame at {target_time:g} s"
    ends = f"{last_time:.3f} s" if last_time is not None else "its start"
    raise ConversionError(f"{path} stops at {ends}, before {wanted}; the video is shorter than its header says or "
                          "truncated")


# quarter turns counter-clockwise -> the Pillow transpose that does the same (for the geometry record)
QUARTER_TURNS = {1: "ROTATE_90", 2: "ROTATE_180", 3: "ROTATE_270"}


def _rotate(pixels: np.ndarray, rotation: int) -> tuple[np.ndarray, int | None, str | None]:
    """Apply the display matrix's rotation (degrees counter-clockwise, as FFmpeg reports it)."""
    turns = (round(rotation / 90) % 4) if rotation else 0
    if not turns:
        return pixels, None, None
    return np.rot90(pixels, turns), rotation, QUARTER_TURNS[turns]


def _square(pixels: np.ndarray, aspect: Fraction | None) -> tuple[np.ndarray, str | None]:
    """Widen (or heighten) anamorphic frames so a pixel is square, as a player shows them."""
    if not aspect or aspect == 1:
        return pixels, None
    height, width = pixels.shape[:2]
    try:
        size = display.square_pixel_size(height, width, 1.0, float(aspect))
    except ValueError:
        return pixels, f"{aspect} (not applied: implausible)"
    if size is None:
        return pixels, None
    return display.resize_to(pixels, size[0], size[1], is_mask=False), str(aspect)
