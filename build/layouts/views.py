"""Several samples from one file: the series of a vendor microscopy file, the frames of a video (and the
section of a volume, named in its sample id).

A view is what the converter is told for one sample (`Sample.view`, merged over the manifest's
`convert:` options) plus the key that makes its sample id: the file's path and the view key, so
the ids stay the same on every rebuild and two frames of one video never share an id.
Which views a file has comes from the manifest (`convert: series: each`, `convert: video:`) and,
for `series: each` and `every_seconds`, from the file's header (series count, duration).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mmbu.build.convert.base import SOURCE_FORMATS, formats_named
from mmbu.core import budget
from mmbu.curation.manifest.model import ConvertSpec


@dataclass(frozen=True)
class View:
    key: str | None  # part of the sample id; None keeps the id of a plain one-image file
    options: dict[str, Any] = field(default_factory=dict)  # ConvertOptions fields for this sample


class ViewError(ValueError):
    """The file's views cannot be listed (unreadable header); one readable sentence."""


def is_video(path: Path) -> bool:
    return bool(formats_named(path, frozenset({"video"})))


def views_for(path: Path, spec: ConvertSpec, video_frame: int | None = None) -> list[View]:
    """The samples one file gives (by the kind of its format, `base.SOURCE_FORMATS`, as its name says).
    `video_frame` is a video frame named by a label table's row."""
    named = formats_named(path, frozenset({"video", "series", "volume"}))
    source = SOURCE_FORMATS[named[0]] if named else None
    if source is None:
        return [View(None)]
    if source.kind == "video":
        return _video_views(path, spec, video_frame)
    if source.kind == "series":
        return _series_views(path, spec, named[0])
    if source.view_key == "axis":
        return [View(f"slice={spec.slice};axis={spec.axis}")]
    if source.view_key == "section":  # an xy section: `slice` (an index or the mask's largest section), else `z`
        return [View(f"z={spec.z}" if spec.slice == "middle" else f"slice={spec.slice}")]
    return [View(None)]


def _video_views(path: Path, spec: ConvertSpec, video_frame: int | None) -> list[View]:
    if video_frame is not None:
        return [View(f"video_frame={video_frame}", {"frame": video_frame})]
    video = spec.video
    if video is None:
        return [View(f"frame={spec.frame}")]
    if video.frames is not None:
        frames = video.frames[: video.max_frames] if video.max_frames else video.frames
        return [View(f"video_frame={n}", {"frame": n}) for n in frames]
    from mmbu.build.convert.base import ConversionError
    from mmbu.build.convert.video import video_info

    try:
        duration = video_info(path)["duration"]
    except ConversionError as exc:
        raise ViewError(str(exc)) from None
    if not duration:
        raise ViewError(f"{path.name} declares no duration, so frames every {video.every_seconds:g} s cannot be "
                        "listed; give frame indices instead")
    count = int(duration // video.every_seconds) + (1 if duration % video.every_seconds else 0)
    count = min(count, video.max_frames) if video.max_frames else count
    try:  # an 873-byte file may declare 10^7 seconds: the list of its frames is bounded before it is made
        budget.check_slices(path.name, count, f"frames (one every {video.every_seconds:g} s of {duration:,.6g} s)")
    except budget.OverBudget as exc:
        raise ViewError(f"{exc}; set convert.video.max_frames") from None
    times = [round(k * video.every_seconds, 6) for k in range(count)]
    return [View(f"video_time={t:g}", {"frame_time": t}) for t in times]


def _series_views(path: Path, spec: ConvertSpec, format_name: str) -> list[View]:
    planes = f"z={spec.z};t={spec.t}"
    if spec.series != "each":
        return [View(f"series={spec.series};{planes}")]
    from mmbu.build.convert.base import ConversionError
    from mmbu.build.convert.microscopy_vendors import list_series

    try:
        series = list_series(path, format_name)
    except ConversionError as exc:
        raise ViewError(str(exc)) from None
    return [View(f"series={s.index};{planes}", {"series": s.index}) for s in series]
