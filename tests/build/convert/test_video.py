"""Video frames: the seeked, one-frame-at-a-time decode equals PyAV's own sequential frame grab."""
from __future__ import annotations

import sys
from pathlib import Path

import av
import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))

from factories_video import level_of, write_video  # noqa: E402

from mmbu.build.convert.base import ConversionError, ConvertOptions  # noqa: E402
from mmbu.build.convert.batch import convert_paths  # noqa: E402
from mmbu.build.convert.dispatch import read_image  # noqa: E402
from mmbu.build.convert.sniff import identify  # noqa: E402

CONTAINERS = {"mp4": dict(codec="libx264"), "avi": dict(codec="mjpeg"), "mkv": dict(codec="ffv1")}


def grab(path: Path, index: int) -> np.ndarray:
    """The reference: decode from the first frame and keep the index-th (what ffmpeg's select=eq(n,N) does)."""
    with av.open(str(path)) as container:
        for number, frame in enumerate(container.decode(video=0)):
            if number == index:
                return frame.to_ndarray(format="rgb24")
    raise AssertionError(f"{path} has no frame {index}")


@pytest.fixture(scope="module")
def videos(tmp_path_factory):
    folder = tmp_path_factory.mktemp("videos")
    return {suffix: write_video(folder / f"clip.{suffix}", **kwargs) for suffix, kwargs in CONTAINERS.items()}


@pytest.mark.parametrize("suffix", list(CONTAINERS))
@pytest.mark.parametrize("index", [0, 1, 13, 37, 59])
def test_frame_by_index_equals_the_sequential_grab(videos, suffix, index):
    converted = read_image(videos[suffix], ConvertOptions(frame=index))
    np.testing.assert_array_equal(converted.pixels, grab(videos[suffix], index))
    assert converted.params["frame_index"] == index and converted.frame == index
    assert converted.format == "video" and converted.params["frame_count"] == 60
    assert converted.params["seeked_to_keyframe"] is (index > 0)
    assert converted.geometry.stored_size == converted.geometry.output_size == (96, 64)


@pytest.mark.parametrize("suffix", list(CONTAINERS))
def test_middle_and_time_choose_the_documented_frames(videos, suffix):
    middle = read_image(videos[suffix], ConvertOptions())
    np.testing.assert_array_equal(middle.pixels, grab(videos[suffix], 30))
    assert middle.params["frame_choice"] == "middle"
    at_time = read_image(videos[suffix], ConvertOptions(frame_time=1.01))  # 25 fps: frame 26 is the first at or after
    np.testing.assert_array_equal(at_time.pixels, grab(videos[suffix], 26))
    assert at_time.params["frame_time_s"] == pytest.approx(1.04) and at_time.params["requested_time_s"] == 1.01
    assert abs(level_of(at_time.pixels) - (20 + 8 * 26 % 200)) <= 3  # the frame shows its own index


def test_grey_video_becomes_a_grey_png(tmp_path):
    path = write_video(tmp_path / "echo.mkv", frames=10, codec="ffv1", grey=True)
    converted = read_image(path, ConvertOptions(frame=3))
    assert converted.mode == "L" and converted.params["mode"] == "grey (R = G = B)"


def test_frames_past_the_end_and_truncated_videos_fail_one_by_one(tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    whole = write_video(folder / "whole.mp4", frames=40)
    cut = folder / "cut.mp4"  # the index (moov) is written last, so a cut MP4 cannot be opened
    cut.write_bytes(whole.read_bytes()[: whole.stat().st_size // 2])
    streamable = write_video(tmp_path / "streamable.avi", frames=40, codec="mjpeg")
    (folder / "stops.avi").write_bytes(streamable.read_bytes()[: streamable.stat().st_size // 2])
    out = tmp_path / "out"
    records = {Path(r["source"]).name: r for r in convert_paths([folder], out, ConvertOptions(frame=35))}
    assert records["whole.mp4"]["status"] == "ok"
    assert "not a readable video" in records["cut.mp4"]["error"] and "truncated" in records["cut.mp4"]["error"]
    assert "stops.avi has damaged or truncated video data after" in records["stops.avi"]["error"]
    for name in ("cut", "stops"):
        assert not (out / f"{name}.png").exists()
    with pytest.raises(ConversionError, match=r"stops at 1\.560 s, before frame 400"):
        read_image(whole, ConvertOptions(frame=400))


def test_containers_are_sniffed_from_content(videos, tmp_path):
    for suffix, path in videos.items():
        renamed = tmp_path / f"{suffix}.dat"
        renamed.write_bytes(path.read_bytes())
        assert identify(renamed).format == "video"


def test_a_video_is_never_a_mask(videos):
    with pytest.raises(ConversionError, match="not label masks"):
        read_image(videos["mkv"], ConvertOptions(as_mask=True))


def test_anamorphic_pixels_are_widened_to_square_ones(tmp_path):
    from fractions import Fraction

    path = write_video(tmp_path / "wide.mp4", frames=10, sample_aspect=Fraction(2, 1))
    converted = read_image(path, ConvertOptions(frame=4))
    assert converted.pixels.shape == (64, 192, 3) and converted.params["sample_aspect_ratio"] == "2"
    assert converted.geometry.stored_size == (96, 64) and converted.geometry.scale == (2.0, 1.0)
    stored = grab(path, 4)
    assert abs(int(converted.pixels[:, 100:180].mean()) - int(stored[:, 50:90].mean())) <= 2  # same picture, wider


def test_heif_photographs_are_not_taken_for_video(tmp_path):
    photo = tmp_path / "photo.heic"
    photo.write_bytes(b"\x00\x00\x00\x18ftypheic\x00\x00\x00\x00mif1heic" + b"\x00" * 64)
    with pytest.raises(ConversionError, match="not an image format this converter knows"):
        identify(photo)
