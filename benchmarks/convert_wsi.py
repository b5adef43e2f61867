"""Whole-slide thumbnails: `mmbu convert` against libvips `vipsthumbnail`, same inputs, same run.

Run by hand (needs `apt-get install -y libvips-tools` for the peer):

    .venv/bin/python benchmarks/convert_wsi.py [--runs 3] [--write-results]

Inputs are generated once into `benchmarks/.work/` (git-ignored) with tifffile, tile by tile:

* `pyramid-32768.tiff`: 32768² JPEG-tiled RGB, levels halving down to 256 px (a generic pyramidal
  TIFF as openslide and libvips read it);
* `single-20480.tiff`: 20480² JPEG-tiled RGB with one level only (BigTIFF).

Tiles cycle through a few textured patches so JPEG decoding costs something like tissue does.
Each tool makes a 2048-px PNG; wall time and peak RSS come from `/usr/bin/time -v`, the median of
`--runs` runs is kept. For reference, openslide's own `get_thumbnail` is run once on the
single-level file under an address-space cap (it reads the whole level at once).
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import tifffile

ROOT = Path(__file__).resolve().parents[1]
WORK = ROOT / "benchmarks" / ".work"
RESULTS = ROOT / "benchmarks" / "RESULTS.md"
HEADING = "## Whole-slide thumbnails vs libvips"
OUTPUT_SIZE = 2048
TILE = 256
GET_THUMBNAIL_CAP_BYTES = 12 * 2**30  # keeps the reference run from taking the machine down


def texture_tiles(count: int = 8, tile: int = TILE) -> list[np.ndarray]:
    """Smooth random stain-like patches: pinks and purples with structure at several scales."""
    rng = np.random.default_rng(0)
    tiles = []
    for _ in range(count):
        noise = rng.random((tile // 16, tile // 16, 3))
        coarse = np.kron(noise, np.ones((16, 16, 1)))
        fine = rng.random((tile, tile, 3)) * 0.25
        base = np.array([225, 160, 200]) - (coarse * 0.6 + fine) * np.array([60, 110, 50])
        tiles.append(np.clip(base, 0, 255).astype(np.uint8))
    return tiles


def write_level(writer: tifffile.TiffWriter, size: int, tiles: list[np.ndarray], reduced: bool) -> None:
    across = -(-size // TILE)

    def generate():
        for index in range(across * across):
            yield tiles[index % len(tiles)]

    writer.write(
        generate(), shape=(size, size, 3), dtype=np.uint8, photometric="rgb", tile=(TILE, TILE),
        compression="jpeg", compressionargs={"level": 85}, subfiletype=1 if reduced else 0,
    )


def make_inputs() -> dict[str, Path]:
    WORK.mkdir(parents=True, exist_ok=True)
    tiles = texture_tiles()
    pyramid = WORK / "pyramid-32768.tiff"
    if not pyramid.exists():
        partial = pyramid.with_suffix(".partial")
        with tifffile.TiffWriter(partial, bigtiff=True) as writer:
            size = 32768
            while size >= TILE:
                write_level(writer, size, tiles, reduced=size != 32768)
                size //= 2
        os.replace(partial, pyramid)
    single = WORK / "single-20480.tiff"
    if not single.exists():
        partial = single.with_suffix(".partial")
        with tifffile.TiffWriter(partial, bigtiff=True) as writer:
            write_level(writer, 20480, tiles, reduced=False)
        os.replace(partial, single)
    return {"pyramid 32768² (levels ×2)": pyramid, "single level 20480²": single}


def timed(command: list[str], limit_bytes: int | None = None) -> tuple[float, float, float, int]:
    """(wall seconds, CPU seconds, peak RSS MiB, exit code) of one run under /usr/bin/time -v."""
    prefix = ["prlimit", f"--as={limit_bytes}"] if limit_bytes else []
    result = subprocess.run(["/usr/bin/time", "-v", *prefix, *command], capture_output=True, text=True)
    wall = re.search(r"Elapsed \(wall clock\) time.*: (?:(\d+):)?(\d+):([\d.]+)", result.stderr)
    hours, minutes, seconds = (float(g) if g else 0.0 for g in wall.groups())
    rss_kib = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", result.stderr).group(1))
    cpu = sum(float(re.search(rf"{kind} time \(seconds\): ([\d.]+)", result.stderr).group(1)) for kind in ("User", "System"))
    return hours * 3600 + minutes * 60 + seconds, cpu, rss_kib / 1024, result.returncode


def mmbu_command(source: Path, out: Path) -> list[str]:
    return [str(ROOT / ".venv" / "bin" / "mmbu"), "convert", str(source), "--out", str(out), "--max-size", str(OUTPUT_SIZE)]


def vips_command(source: Path, out: Path) -> list[str]:
    return ["vipsthumbnail", str(source), "--size", f"{OUTPUT_SIZE}x{OUTPUT_SIZE}", "-o", str(out / "vips.png")]


def read_only_command(source: Path, out: Path) -> list[str]:
    """The converter alone (`mmbu.build.convert.wsi.read`, no sniffing, no PNG encoding): where the time goes."""
    script = (
        "import sys; from pathlib import Path; from mmbu.build.convert import wsi; "
        "from mmbu.build.convert.base import ConvertOptions; "
        f"wsi.read(Path(sys.argv[1]), ConvertOptions(max_size={OUTPUT_SIZE}))"
    )
    return [sys.executable, "-c", script, str(source)]


def get_thumbnail_command(source: Path, out: Path) -> list[str]:
    script = (
        "import sys, openslide; s = openslide.OpenSlide(sys.argv[1]); "
        f"s.get_thumbnail(({OUTPUT_SIZE}, {OUTPUT_SIZE})).save(sys.argv[2])"
    )
    return [sys.executable, "-c", script, str(source), str(out / "openslide.png")]


def png_encode_costs(source: Path) -> dict[str, tuple[float, int]]:
    """CPU seconds and bytes to encode the converter's 2048-px output as PNG: the writer's own setting
    (`writer.encode_png`) against Pillow at zlib levels 6 (its default), 4 and 1."""
    import io

    from PIL import Image

    from mmbu.build.convert import wsi, writer
    from mmbu.build.convert.base import ConvertOptions

    pixels = wsi.read(source, ConvertOptions(max_size=OUTPUT_SIZE)).pixels

    def pillow(level: int) -> bytes:
        buffer = io.BytesIO()
        Image.fromarray(pixels).save(buffer, "PNG", compress_level=level)
        return buffer.getvalue()

    encoders = {
        f"writer.encode_png (libpng zlib {writer.RGB_ZLIB_LEVEL}, Up filter)": lambda: writer.encode_png(pixels),
        **{f"Pillow zlib {level}": (lambda level=level: pillow(level)) for level in (6, 4, 1)},
    }
    costs = {}
    for name, encode in encoders.items():
        best, size = float("inf"), 0
        for _ in range(3):
            start = time.process_time()
            size = len(encode())
            best = min(best, time.process_time() - start)
        costs[name] = (best, size)
    return costs


def load_average() -> str:
    return "/".join(f"{value:.1f}" for value in os.getloadavg())


def median_run(command_for, source: Path, runs: int) -> tuple[float, float, float]:
    """Median wall and CPU seconds and the largest peak RSS over `runs` runs."""
    walls, cpus, peaks = [], [], []
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as out:
            wall, cpu, peak, code = timed(command_for(source, Path(out)))
            if code != 0:
                raise SystemExit(f"{command_for.__name__} failed on {source}")
        walls.append(wall)
        cpus.append(cpu)
        peaks.append(peak)
    return statistics.median(walls), statistics.median(cpus), max(peaks)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--write-results", action="store_true", help=f"replace the '{HEADING}' section of RESULTS.md")
    args = parser.parse_args()
    if not shutil.which("vipsthumbnail"):
        raise SystemExit("vipsthumbnail not found: apt-get install -y libvips-tools")
    inputs = make_inputs()
    load_before = load_average()
    vips_version = subprocess.run(["vips", "--version"], capture_output=True, text=True).stdout.strip()
    rows = []
    for name, source in inputs.items():
        mmbu = median_run(mmbu_command, source, args.runs)
        vips = median_run(vips_command, source, args.runs)
        rows.append((name, *mmbu, *vips))
        reader = median_run(read_only_command, source, args.runs)
        rows.append((f"{name}: `wsi.read` alone", *reader, *vips))
        print(f"{name}: mmbu {mmbu} | vips {vips} (wall s, CPU s, peak MiB)", flush=True)
    png = png_encode_costs(inputs["pyramid 32768² (levels ×2)"])
    with tempfile.TemporaryDirectory() as out:
        single = inputs["single level 20480²"]
        ref_wall, _ref_cpu, ref_peak, ref_code = timed(get_thumbnail_command(single, Path(out)), GET_THUMBNAIL_CAP_BYTES)
    reference = (
        f"openslide `get_thumbnail` on the single-level file: {ref_wall:.1f} s, peak RSS {ref_peak:.0f} MiB"
        + ("" if ref_code == 0 else f" (failed under the {GET_THUMBNAIL_CAP_BYTES / 2**30:.0f} GiB address-space cap)")
    )
    print(reference)
    load_after = load_average()
    table = [
        "| input | mmbu wall s | vips wall s | wall ratio | mmbu CPU s | vips CPU s | CPU ratio | mmbu peak RSS MiB | vips peak RSS MiB |",
        "|---|---|---|---|---|---|---|---|---|",
        *(
            f"| {n} | {mw:.2f} | {vw:.2f} | {mw / vw:.2f}× | {mc:.2f} | {vc:.2f} | {mc / vc:.2f}× | {mp:.0f} | {vp:.0f} |"
            for n, mw, mc, mp, vw, vc, vp in rows
        ),
    ]
    section = "\n".join(
        [
            HEADING,
            "",
            f"`benchmarks/convert_wsi.py --runs {args.runs}`: 2048-px PNG from JPEG-tiled RGB TIFFs generated by the script; "
            f"wall and CPU (user + system) time are medians of {args.runs} runs of the whole command (interpreter start, "
            "format sniffing and PNG writing included), peak RSS the maximum, all from `/usr/bin/time -v`; the machine "
            f"is shared, so CPU time is the steadier figure. Peer: {vips_version} `vipsthumbnail --size 2048x2048`. "
            "Targets: time ratio ≤ 1.5×, peak ≤ 256 MiB (pyramid) and ≤ 512 MiB (single level). "
            f"Machine load (1/5/15-min averages on 2 cores) {load_before} at the start, {load_after} at the end.",
            "",
            *table,
            "",
            f"Reference: {reference}.",
            "",
            "Reading the figures: the `wsi.read alone` rows are the converter without format sniffing, PNG "
            "encoding and the `mmbu` command's imports. Encoding the 2048² output as PNG (best of 3, CPU s and "
            "size): " + "; ".join(f"{name} {cost:.2f} s, {size / 2**20:.2f} MiB" for name, (cost, size) in png.items())
            + ". libvips writes its PNG with libspng.",
            "",
        ]
    )
    print(section)
    if args.write_results:
        _replace_section(section)


def _replace_section(section: str) -> None:
    sys.path.insert(0, str(ROOT))  # also when run as a script
    from benchmarks import replace_results_section

    replace_results_section(HEADING, section, RESULTS)

if __name__ == "__main__":
    main()
