"""PNG writing: lossless for both encoders, permissions like open(), nothing left behind on failure."""
import io
import os
import stat
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from mmbu.build.convert.writer import encode_png, write_png
from mmbu.core.files import atomic_file


def textured_rgb(height: int = 123, width: int = 77) -> np.ndarray:
    """Noise plus gradients: every filter and zlib path gets exercised; odd sizes catch stride bugs."""
    rng = np.random.default_rng(7)
    ramp = np.linspace(0, 255, width)[None, :, None]
    return np.clip(rng.normal(0, 40, (height, width, 3)) + ramp, 0, 255).astype(np.uint8)


@pytest.mark.parametrize("pixels", [
    textured_rgb(),
    textured_rgb()[..., 0],
    textured_rgb()[:, ::2],  # a strided view: not contiguous
    np.zeros((1, 1, 3), np.uint8),
    np.full((5, 3), 255, np.uint8),
], ids=["rgb", "gray", "rgb-strided", "rgb-1px", "gray-white"])
def test_encoded_png_decodes_to_the_same_pixels_and_mode(pixels):
    image = Image.open(io.BytesIO(encode_png(pixels)))
    assert image.format == "PNG" and image.mode == ("RGB" if pixels.ndim == 3 else "L")
    np.testing.assert_array_equal(np.asarray(image), pixels)


@pytest.mark.parametrize("pixels", [np.zeros((4, 4), np.uint16), np.zeros((4, 4, 4), np.uint8), np.zeros((4, 4, 3), np.float32)])
def test_only_8bit_gray_or_rgb_is_accepted(pixels):
    with pytest.raises(TypeError, match="8-bit L or RGB"):
        encode_png(pixels)


def test_written_png_has_the_permissions_open_would_give(tmp_path):
    write_png(textured_rgb(), tmp_path / "slide.png")
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE((tmp_path / "slide.png").stat().st_mode) == 0o666 & ~umask
    assert [p.name for p in tmp_path.iterdir()] == ["slide.png"]


def test_a_failed_write_keeps_the_previous_file_and_leaves_no_temporary(tmp_path):
    target = tmp_path / "out.png"
    write_png(np.zeros((2, 2), np.uint8), target)
    before = target.read_bytes()
    with pytest.raises(RuntimeError), atomic_file(target) as stream:
        stream.write(b"\x89PNG half")
        raise RuntimeError("disk full")
    assert target.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["out.png"]


def test_atomic_text_file_appears_only_when_complete(tmp_path):
    target = tmp_path / "sub" / "report.jsonl"
    with atomic_file(target, "w", encoding="utf-8") as stream:
        stream.write("{}\n")
        assert not target.exists()
    assert target.read_text(encoding="utf-8") == "{}\n"
    assert sorted(p.name for p in target.parent.iterdir()) == ["report.jsonl"]


def test_batch_report_and_png_are_readable_by_others(tmp_path):
    from mmbu.build.convert.batch import convert_paths

    Image.fromarray(textured_rgb()).save(tmp_path / "photo.png")
    old_umask = os.umask(0o022)
    try:
        convert_paths([tmp_path / "photo.png"], tmp_path / "out")
    finally:
        os.umask(old_umask)
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in Path(tmp_path / "out").iterdir()}
    assert modes == {"photo.png": 0o644, "convert-report.jsonl": 0o644}


def test_in_place_writes_make_their_folder_once_and_keep_given_bytes(tmp_path):
    pixels = textured_rgb(9, 7)
    first = tmp_path / "new" / "deeper" / "a.png"
    data = write_png(pixels, first, durable=False, atomic=False)  # the folder does not exist yet
    assert first.read_bytes() == data
    np.testing.assert_array_equal(np.asarray(Image.open(first)), pixels)
    stream = encode_png(pixels[..., 0])  # a PNG of exactly the pixels given, as a source PNG's stream would be
    assert write_png(pixels[..., 0], first.with_name("b.png"), atomic=False, encoded=stream) == stream
    assert first.with_name("b.png").read_bytes() == stream
