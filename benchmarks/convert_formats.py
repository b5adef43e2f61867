"""MetaImage/NRRD, vendor microscopy and video conversion against each format's own reader + Pillow.

Run by hand:

    .venv/bin/python benchmarks/convert_formats.py [--runs 3] [--write-results]

One row per family, both sides in this one process, median wall time of `--runs`:

* **MetaImage / NRRD** — `convert_one` (sniff, slice extraction, radiological view, percentile
  window, PNG) against SimpleITK's own path: `ReadImage` (the whole volume), `GetArrayFromImage`, the
  middle axial slice, the same percentile window in numpy, Pillow PNG. A 512×512×300 int16 CT-like
  volume as `.mha` (raw) and as gzip `.nrrd`, written by SimpleITK into `benchmarks/.work/formats/`.
* **CZI** — a 3-channel 16-bit 4096×4096 scan (zstd, 1024² subblocks) written by pylibCZIrw;
  ours at `--max-size 2048` against pylibCZIrw reading each full-resolution channel plane, the same
  per-channel blend in numpy, Pillow LANCZOS to 2048 and PNG.
* **LIF / ND2** — the real test fixtures (small files: per-file overhead) against liffile / nd2 reading
  the plane, the same blend and Pillow.
* **Video** — frame 600 of a 40 s 640×480 H.264 MP4 (25 fps, keyframe every 50) written by PyAV; ours
  against a PyAV frame grab decoding from the start (what `ffmpeg -vf select=eq(n\\,600)` does) and
  against a PyAV keyframe seek + decode, each with Pillow PNG.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from fractions import Fraction
from io import BytesIO
from pathlib import Path

import numpy as np
from PIL import Image

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a script too: `benchmarks` importable
from benchmarks import replace_results_section  # noqa: E402
WORK = ROOT / "benchmarks" / ".work" / "formats"
HEADING = "## MetaImage/NRRD, vendor microscopy and video vs their own readers"
FIXTURES = ROOT / "tests" / "build" / "convert" / "fixtures" / "microscopy"
COLOURS = ((0, 0, 255), (0, 255, 0), (255, 0, 255))


def _window(values: np.ndarray, ignore_zero: bool = False) -> np.ndarray:
    data = values.astype(np.float64)
    usable = data[data != 0] if ignore_zero else data
    lo, hi = np.percentile(usable, [0.5, 99.5])
    return np.rint(np.clip((data - lo) / max(hi - lo, 1e-9), 0, 1) * 255).astype(np.uint8)


def _blend(planes: list[np.ndarray], colours) -> np.ndarray:
    total = np.zeros(planes[0].shape + (3,), np.float32)
    for plane, colour in zip(planes, colours):
        total += _window(plane)[..., None].astype(np.float32) / 255 * (np.asarray(colour, np.float32) / 255)
    return np.clip(np.rint(total * 255), 0, 255).astype(np.uint8)


def _png(pixels: np.ndarray) -> bytes:
    buffer = BytesIO()
    Image.fromarray(pixels).save(buffer, format="PNG")
    return buffer.getvalue()


def make_inputs() -> dict[str, Path]:
    WORK.mkdir(parents=True, exist_ok=True)
    paths = {"mha": WORK / "ct.mha", "nrrd": WORK / "ct.nrrd", "czi": WORK / "scan.czi", "mp4": WORK / "scope.mp4"}
    if not paths["mha"].exists() or not paths["nrrd"].exists():
        import SimpleITK as sitk

        rng = np.random.default_rng(0)
        volume = (rng.normal(40, 30, (300, 512, 512)) + np.linspace(-1000, 1000, 512)[None, None, :]).astype(np.int16)
        image = sitk.GetImageFromArray(volume)
        image.SetSpacing((0.7, 0.7, 1.0))
        sitk.WriteImage(image, str(paths["mha"]))
        sitk.WriteImage(image, str(paths["nrrd"]), useCompression=True)
    if not paths["czi"].exists():
        from pylibCZIrw import czi as pyczi

        rng = np.random.default_rng(1)
        with pyczi.create_czi(str(paths["czi"]), exist_ok=True, compression_options="zstd0:ExplicitLevel=1") as writer:
            for channel in range(3):
                for z in range(1):
                    for ty in range(4):
                        for tx in range(4):
                            tile = rng.integers(100, 4000, (1024, 1024)).astype(np.uint16)
                            writer.write(tile, plane={"C": channel, "Z": z, "T": 0}, location=(tx * 1024, ty * 1024))
    if not paths["mp4"].exists():
        import av

        with av.open(str(paths["mp4"]), mode="w") as container:
            stream = container.add_stream("libx264", rate=25)
            stream.width, stream.height, stream.pix_fmt = 640, 480, "yuv420p"
            stream.codec_context.gop_size = 50
            stream.time_base = Fraction(1, 25)
            yy, xx = np.mgrid[0:480, 0:640]
            for index in range(1000):
                picture = np.stack([(xx + index) % 256, (yy + 2 * index) % 256, (xx + yy) % 256], -1).astype(np.uint8)
                frame = av.VideoFrame.from_ndarray(picture, format="rgb24")
                frame.pts = index
                for packet in stream.encode(frame):
                    container.mux(packet)
            for packet in stream.encode():
                container.mux(packet)
    paths["lif"] = FIXTURES / "testdata_2channel_xz.lif"
    paths["nd2"] = FIXTURES / "cluster.nd2"
    return paths


def reference_itk(path: Path) -> bytes:
    import SimpleITK as sitk

    array = sitk.GetArrayFromImage(sitk.ReadImage(str(path)))  # (z, y, x): the whole volume
    return _png(_window(array[array.shape[0] // 2], ignore_zero=True))


def reference_czi(path: Path) -> bytes:
    from pylibCZIrw import czi as pyczi

    with pyczi.open_czi(str(path)) as doc:
        planes = [doc.read(plane={"C": c, "Z": 0, "T": 0})[..., 0] for c in range(3)]
    rgb = Image.fromarray(_blend(planes, COLOURS)).resize((2048, 2048), Image.Resampling.LANCZOS)
    return _png(np.asarray(rgb))


def reference_lif(path: Path) -> bytes:
    import liffile

    with liffile.LifFile(path) as lif:
        data = lif.images[2].asarray()
    return _png(_blend([data[0], data[1]], ((0, 255, 0), (255, 0, 0))))


def reference_nd2(path: Path) -> bytes:
    import nd2

    with nd2.ND2File(path) as handle:
        frame = np.array(handle.read_frame(15))  # a copy: the frame is a view on the file's memory map
        colours = [(c.channel.color.r, c.channel.color.g, c.channel.color.b) for c in handle.metadata.channels]
    return _png(_blend([frame[0], frame[1]], colours))


def reference_video_sequential(path: Path, index: int = 600) -> bytes:
    import av

    with av.open(str(path)) as container:
        for number, frame in enumerate(container.decode(video=0)):
            if number == index:
                return _png(frame.to_ndarray(format="rgb24"))
    raise RuntimeError("short video")


def reference_video_seek(path: Path, index: int = 600) -> bytes:
    import av

    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        target = int(index / stream.average_rate / stream.time_base)
        container.seek(target, stream=stream)
        for frame in container.decode(stream):
            if frame.pts >= target:
                return _png(frame.to_ndarray(format="rgb24"))
    raise RuntimeError("short video")


def ours(path: Path, **options) -> Callable[[], object]:
    from mmbu.build.convert.base import ConvertOptions
    from mmbu.build.convert.batch import convert_one

    out = WORK / "out" / f"{path.stem}-{path.suffix[1:]}.png"
    out.parent.mkdir(parents=True, exist_ok=True)

    def run() -> object:
        record = convert_one(path, out, ConvertOptions(**options))
        if record["status"] != "ok":
            raise RuntimeError(record["error"])
        return record

    return run


def paired_medians(mine: Callable[[], object], reference: Callable[[], object], runs: int) -> tuple[float, float]:
    """Median seconds of each side, the two run alternately so a change in the machine's load hits both."""
    mine(), reference()  # warm: imports, page cache
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(runs):
        for work, spent in ((mine, times[0]), (reference, times[1])):
            start = time.perf_counter()
            work()
            spent.append(time.perf_counter() - start)
    return statistics.median(times[0]), statistics.median(times[1])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--write-results", action="store_true", help=f"replace the '{HEADING}' section of RESULTS.md")
    args = parser.parse_args(argv)
    paths = make_inputs()
    rows = [
        ("MetaImage", "512×512×300 int16 .mha (raw), middle axial slice", ours(paths["mha"]),
         "SimpleITK ReadImage + slice + Pillow", lambda: reference_itk(paths["mha"])),
        ("NRRD", "the same volume, gzip .nrrd", ours(paths["nrrd"]),
         "SimpleITK ReadImage + slice + Pillow", lambda: reference_itk(paths["nrrd"])),
        ("CZI", "4096² × 3 ch uint16, zstd → 2048²", ours(paths["czi"], max_size=2048),
         "pylibCZIrw full planes + blend + Pillow", lambda: reference_czi(paths["czi"])),
        ("LIF", "fixture, series 2 (512² × 2 ch)", ours(paths["lif"], series=2),
         "liffile plane + blend + Pillow", lambda: reference_lif(paths["lif"])),
        ("ND2", "fixture (38×31 × 2 ch, T=3, Z=10)", ours(paths["nd2"]),
         "nd2 read_frame + blend + Pillow", lambda: reference_nd2(paths["nd2"])),
        ("Video", "frame 600 of 640×480 H.264 MP4 (40 s)", ours(paths["mp4"], frame=600),
         "PyAV grab from the start + Pillow", lambda: reference_video_sequential(paths["mp4"])),
        ("Video", "frame 600, same file", ours(paths["mp4"], frame=600),
         "PyAV keyframe seek + Pillow", lambda: reference_video_seek(paths["mp4"])),
    ]
    lines = [HEADING, "",
             f"Median of {args.runs} runs after one warm-up, both sides alternating in one Python process "
             f"(`benchmarks/convert_formats.py`, {time.strftime('%Y-%m-%d')}; load average {os.getloadavg()[0]:.1f} on "
             f"{os.cpu_count()} cores). Ours is `convert_one`: sniffing, "
             "reading, display rules and the atomic PNG write.", "",
             "| family | input | ours (s) | reference | reference (s) | ours / reference |", "|---|---|---|---|---|---|"]
    for family, what, mine, reference_name, reference in rows:
        ours_s, ref_s = paired_medians(mine, reference, args.runs)
        lines.append(f"| {family} | {what} | {ours_s:.3f} | {reference_name} | {ref_s:.3f} | {ours_s / ref_s:.2f} |")
        print(lines[-1], flush=True)
    section = "\n".join(lines) + "\n"
    if args.write_results:
        replace_results_section(HEADING, section)

if __name__ == "__main__":
    sys.exit(main())
