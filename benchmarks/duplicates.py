"""The duplicate-image step: which perceptual hash, which threshold, and what it costs at 78K images.

    .venv/bin/python -m benchmarks.duplicates [--quick] [--index-sizes 78000] [--write-results]

Images (all real, from files the project or its dependencies ship; nothing downloaded):
  * H&E: 160-px tissue tiles of CMU-1-Small-Region.svs (demo mirror; bare-glass tiles, grey std < 20, left out);
  * grey MR/CT/NM: slices 4 or more apart of nibabel's `anatomical.nii` and `example4d.nii.gz` (axial and
    coronal), pydicom's CT (`693_J2KI.dcm`, `CT_small.dcm`), NM (`JPEG2000.dcm`) and MR (`MR_small.dcm`,
    `examples_overlay.dcm`) test files, matplotlib's MR sample `s1045.ima.gz`; rendered with a 0.5–99.5
    percentile window from the stored values;
  * fluorescence: 128-px tiles of the DSB 2018 nuclei image (demo mirror, 16-bit).
Copies (the positives): resized (½, ¼, 64 px as MedMNIST+), JPEG re-encoded (q 90/75/50), ½ + JPEG 75, re-windowed
(grey and fluorescence: other percentile windows of the stored values; H&E: brightness, contrast, saturation,
gamma), cropped (2, 5, 10 % off each side; 5 % off one side). Distinct images of one group are the negatives.
Cost: hashing real PNGs of release sizes, and the range search over 78K codes (random, and the hashes of 78K
overlapping slide tiles: heavy clustering) against all-pairs numpy and, when installed, faiss.
"""
from __future__ import annotations

import argparse
import io
import itertools
import os
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from PIL import Image, ImageEnhance, ImageOps

ROOT = Path(__file__).resolve().parents[1]
WORK = ROOT / "benchmarks" / ".work" / "duplicates"
SLIDE = ROOT / "manifests/mirror/demo_cmu1_wsi/hematoxylin_and_eosin/CMU-1-Small-Region.svs"
NUCLEI = ROOT / "manifests/mirror/demo_dsb2018_nuclei/images/dsb2018_nuclei.tif"
HEADING = "## Duplicates: perceptual hash, threshold and index"
THRESHOLDS = (8, 16, 24, 31)


def window(values: np.ndarray, low: float, high: float) -> Image.Image:
    lo, hi = np.percentile(values, [low, high])
    return Image.fromarray((np.clip((values - lo) / max(hi - lo, 1e-9), 0, 1) * 255).round().astype(np.uint8))


def at_least(image: Image.Image, side: int = 256) -> Image.Image:
    """Small volumes' slices enlarged to a release-like size (as a converter with a minimum size would)."""
    if image.width >= side:
        return image
    return image.resize((side, round(image.height * side / image.width)), Image.LANCZOS)


def he_tiles(size: int = 160, limit: int | None = None) -> list[Image.Image]:
    import openslide

    tiles = []
    with openslide.OpenSlide(SLIDE) as slide:
        width, height = slide.dimensions
        for y in range(0, height - size + 1, size):
            for x in range(0, width - size + 1, size):
                tile = slide.read_region((x, y), 0, (size, size)).convert("RGB")
                if np.asarray(tile.convert("L")).std() >= 20:
                    tiles.append(tile)
    return tiles[:limit]


def grey_values() -> list[np.ndarray]:
    """Stored values (before any window) of distinct MR/CT/NM images."""
    import nibabel
    import pydicom
    from matplotlib import cbook
    from pydicom.data import get_testdata_file

    nibabel_data = Path(nibabel.__file__).parent / "tests" / "data"
    values = []
    anatomical = nibabel.load(nibabel_data / "anatomical.nii").get_fdata()
    values += [np.rot90(anatomical[:, :, z]) for z in range(2, anatomical.shape[2], 5)]
    values += [np.rot90(anatomical[:, y, :]) for y in range(8, anatomical.shape[1] - 4, 8)]
    functional = nibabel.load(nibabel_data / "example4d.nii.gz").get_fdata()[..., 0]
    values += [np.rot90(functional[:, :, z]) for z in range(2, functional.shape[2], 5)]
    for name in ("693_J2KI.dcm", "CT_small.dcm", "JPEG2000.dcm", "MR_small.dcm", "examples_overlay.dcm"):
        values.append(pydicom.dcmread(get_testdata_file(name)).pixel_array.astype(float))
    with cbook.get_sample_data("s1045.ima.gz") as handle:
        values.append(np.frombuffer(handle.read(), "<u2").reshape(256, 256).astype(float))  # opened unzipped
    return values


def fluorescence_values() -> list[np.ndarray]:
    import tifffile

    image = tifffile.imread(NUCLEI).astype(float)
    return [image[y:y + 128, x:x + 128] for y in range(0, 512, 128) for x in range(0, 512, 128)]


def jpeg(image: Image.Image, quality: int) -> Image.Image:
    buffer = io.BytesIO()
    image.save(buffer, "JPEG", quality=quality)
    return Image.open(io.BytesIO(buffer.getvalue())).convert(image.mode)


def resized(image: Image.Image, factor: float) -> Image.Image:
    return image.resize((max(8, round(image.width * factor)), max(8, round(image.height * factor))), Image.LANCZOS)


def cropped(image: Image.Image, fraction: float, one_side: bool = False) -> Image.Image:
    dx, dy = round(image.width * fraction), round(image.height * fraction)
    if one_side:
        return image.crop((dx, 0, image.width, image.height))
    return image.crop((dx, dy, image.width - dx, image.height - dy))


def gamma(image: Image.Image, value: float) -> Image.Image:
    return Image.fromarray((255 * (np.asarray(image) / 255.0) ** value).round().astype(np.uint8))


GEOMETRY: dict[str, Callable[[Image.Image], Image.Image]] = {
    "resize ½": lambda i: resized(i, 0.5),
    "resize ¼": lambda i: resized(i, 0.25),
    "resize to 64 px": lambda i: i.resize((64, 64), Image.LANCZOS),
    "JPEG q90": lambda i: jpeg(i, 90),
    "JPEG q75": lambda i: jpeg(i, 75),
    "JPEG q50": lambda i: jpeg(i, 50),
    "½ + JPEG q75": lambda i: jpeg(resized(i, 0.5), 75),
    "crop 2 %/side": lambda i: cropped(i, 0.02),
    "crop 5 %/side": lambda i: cropped(i, 0.05),
    "crop 10 %/side": lambda i: cropped(i, 0.10),
    "crop 5 % one side": lambda i: cropped(i, 0.05, one_side=True),
}
COLOUR: dict[str, Callable[[Image.Image], Image.Image]] = {
    "H&E brightness ×1.15": lambda i: ImageEnhance.Brightness(i).enhance(1.15),
    "H&E contrast ×1.3": lambda i: ImageEnhance.Contrast(i).enhance(1.3),
    "H&E saturation ×0.6": lambda i: ImageEnhance.Color(i).enhance(0.6),
    "H&E gamma 0.8": lambda i: gamma(i, 0.8),
}
WINDOWS = {"window 2–98 %": (2, 98), "window min–max": (0, 100), "window 10–90 %": (10, 90)}


def corpus(quick: bool) -> dict[str, list[tuple[Image.Image, dict[str, Image.Image]]]]:
    """Per group: (original, {transform name: copy})."""
    groups: dict[str, list[tuple[Image.Image, dict[str, Image.Image]]]] = {"H&E tiles": [], "grey MR/CT/NM": [],
                                                                          "fluorescence": []}
    for tile in he_tiles(limit=40 if quick else None):
        copies = {name: make(tile) for name, make in {**GEOMETRY, **COLOUR}.items()}
        groups["H&E tiles"].append((tile, copies))
    for group, stack, smallest in (("grey MR/CT/NM", grey_values(), 256), ("fluorescence", fluorescence_values(), 128)):
        for values in stack:
            original = at_least(window(values, 0.5, 99.5), smallest)
            copies = {name: make(original) for name, make in GEOMETRY.items()}
            copies.update({name: at_least(window(values, *limits), smallest) for name, limits in WINDOWS.items()})
            groups[group].append((original, copies))
    return groups


def hashers() -> dict[str, Callable[[Image.Image], np.ndarray]]:
    """Candidate hashes, each as a bit vector; the last is what the build uses (either of two pHashes)."""
    import imagehash

    from mmbu.build.duplicates.hashing import HASH_SIZE

    def bits(function: Callable, **options) -> Callable[[Image.Image], np.ndarray]:
        return lambda image: function(image, **options).hash.flatten()

    def equalised(image: Image.Image) -> np.ndarray:
        return imagehash.phash(ImageOps.equalize(image.convert("L")), hash_size=HASH_SIZE).hash.flatten()

    return {
        "aHash 64": bits(imagehash.average_hash, hash_size=8),
        "aHash 256": bits(imagehash.average_hash, hash_size=16),
        "dHash 256": bits(imagehash.dhash, hash_size=16),
        "wHash 256 (Haar)": bits(imagehash.whash, hash_size=16),
        "pHash 64": bits(imagehash.phash, hash_size=8),
        "pHash 256 grey": bits(imagehash.phash, hash_size=16),
        "pHash 256 equalised": equalised,
    }


def distances(groups, hash_names: list[str]) -> dict[str, dict]:
    """Per hash and group: distances of each copy to its original, and between distinct originals."""
    from mmbu.build.duplicates.hashing import image_hashes

    functions = hashers()
    measured: dict[str, dict] = {}
    for name in [*hash_names, "build: either pHash 256"]:
        measured[name] = {}
        for group, items in groups.items():
            if name == "build: either pHash 256":
                grey, eq = measured["pHash 256 grey"][group], measured["pHash 256 equalised"][group]
                measured[name][group] = {
                    "negatives": np.minimum(grey["negatives"], eq["negatives"]),
                    "positives": {k: np.minimum(grey["positives"][k], eq["positives"][k]) for k in grey["positives"]}}
                continue
            codes = [functions[name](original) for original, _ in items]
            negatives = np.array([int((a != b).sum()) for a, b in itertools.combinations(codes, 2)])
            positives = {transform: np.array([int((functions[name](copies[transform]) != code).sum())
                                              for (_, copies), code in zip(items, codes)])
                         for transform in items[0][1]}
            measured[name][group] = {"negatives": negatives, "positives": positives, "bits": len(codes[0])}
    # the build's own code path must agree with the composed figures above (same hashes, PNG round trip)
    tile = groups["H&E tiles"][0][0]
    WORK.mkdir(parents=True, exist_ok=True)
    tile.save(WORK / "check.png")
    assert np.packbits(functions["pHash 256 grey"](tile)).tobytes() == image_hashes(WORK / "check.png").grey
    return measured


def recall_table(measured: dict, threshold_for: dict[str, int]) -> list[str]:
    """Recall of each transform (all groups pooled) per hash at its threshold, and false matches per group."""
    names = list(measured)
    groups = list(next(iter(measured.values())))
    transforms = sorted({t for g in groups for t in measured[names[0]][g]["positives"]},
                        key=lambda t: list({**GEOMETRY, **COLOUR, **WINDOWS}).index(t))
    lines = ["| copy | " + " | ".join(f"{n} (≤{threshold_for[n]})" for n in names) + " |",
             "|---|" + "---|" * len(names)]
    for transform in transforms:
        cells = []
        for name in names:
            found = [measured[name][g]["positives"][transform] for g in groups if transform in measured[name][g]["positives"]]
            pooled = np.concatenate(found)
            cells.append(f"{(pooled <= threshold_for[name]).mean():.0%}")
        lines.append(f"| {transform} | " + " | ".join(cells) + " |")
    for group in groups:
        cells = []
        for name in names:
            negatives = measured[name][group]["negatives"]
            cells.append(f"{int((negatives <= threshold_for[name]).sum())} of {len(negatives)} (closest {negatives.min()})")
        lines.append(f"| **false matches: {group}** | " + " | ".join(cells) + " |")
    return lines


def threshold_sweep(measured: dict) -> list[str]:
    name = "build: either pHash 256"
    groups = list(measured[name])
    lines = ["| max distance | " + " | ".join(f"recall {g}" for g in groups) + " | " +
             " | ".join(f"false matches {g}" for g in groups) + " |", "|---|" + "---|" * (2 * len(groups))]
    for threshold in THRESHOLDS:
        recalls, false = [], []
        for group in groups:
            positives = np.concatenate([v for k, v in measured[name][group]["positives"].items() if "crop" not in k])
            recalls.append(f"{(positives <= threshold).mean():.1%}")
            negatives = measured[name][group]["negatives"]
            false.append(f"{int((negatives <= threshold).sum())}/{len(negatives)}")
        lines.append(f"| {threshold} | " + " | ".join(recalls) + " | " + " | ".join(false) + " |")
    return lines


def hashing_cost(count: int) -> list[str]:
    """Milliseconds per image for `image_hashes` on release-like PNGs (decode included)."""
    from mmbu.build.duplicates.hashing import image_hashes

    rng = np.random.default_rng(0)
    WORK.mkdir(parents=True, exist_ok=True)
    tiles = he_tiles(size=512, limit=4)
    shapes = {"512² grey": lambda k: Image.fromarray(rng.integers(0, 255, (512, 512), np.uint8)).filter(
        __import__("PIL.ImageFilter", fromlist=["GaussianBlur"]).GaussianBlur(2)),
        "512² RGB (H&E)": lambda k: tiles[k % len(tiles)],
        "2048² RGB (slide thumbnail)": lambda k: tiles[k % len(tiles)].resize((2048, 2048), Image.BICUBIC),
        "2140×1760 grey (radiograph)": lambda k: at_least(window(grey_values()[5], 0.5, 99.5), 2140)}
    lines = ["| image | ms per image (decode + 2 hashes + sha256) | 78K images at that size, one core |", "|---|---|---|"]
    for label, make in shapes.items():
        paths = []
        for k in range(min(count, 4)):
            path = WORK / f"cost-{label.split()[0]}-{k}.png"
            make(k).save(path)
            paths.append(path)
        started = time.process_time()
        for k in range(count):
            image_hashes(paths[k % len(paths)])
        per_image = (time.process_time() - started) / count
        lines.append(f"| {label} | {per_image * 1000:.1f} | {per_image * 78000 / 60:.1f} min |")
    return lines


def clustered_codes(n: int) -> np.ndarray:
    """Hashes of n overlapping 96-px tiles of the slide at an 8-px stride: many near-identical neighbours."""
    import openslide

    from mmbu.build.duplicates.hashing import phash_bytes

    codes = []
    with openslide.OpenSlide(SLIDE) as slide:
        width, height = slide.dimensions
        region = slide.read_region((0, 0), 0, (width, height)).convert("L")
    pixels = np.asarray(region)
    for y in range(0, height - 96, 8):
        for x in range(0, width - 96, 8):
            codes.append(phash_bytes(Image.fromarray(pixels[y:y + 96, x:x + 96])))
            if len(codes) == n:
                return np.frombuffer(b"".join(codes), np.uint8).reshape(n, -1)
    return np.frombuffer(b"".join(codes), np.uint8).reshape(len(codes), -1)


def all_pairs_numpy(codes: np.ndarray, radius: int, block: int = 2048) -> int:
    words = codes.view(np.uint64)
    found = 0
    for start in range(0, len(words), block):
        chunk = words[start:start + block]
        distances = np.zeros((len(chunk), len(words)), np.int32)
        for column in range(words.shape[1]):
            distances += np.bitwise_count(chunk[:, column, None] ^ words[None, :, column])
        rows = np.arange(start, start + len(chunk))[:, None]
        found += int(((distances <= radius) & (np.arange(len(words))[None, :] > rows)).sum())
    return found


def index_cost(sizes: list[int], radius: int) -> list[str]:
    from mmbu.build.duplicates.index import pairs_within

    lines = ["| codes | kind | pairs ≤ radius | multi-index hashing (s) | all pairs, numpy (s) | faiss IndexBinaryFlat "
             "range search (s) | speed-up vs numpy |", "|---|---|---|---|---|---|---|"]
    rng = np.random.default_rng(0)
    for n in sizes:
        for kind, codes in (("random", rng.integers(0, 256, (n, 32), dtype=np.uint8)),
                            ("overlapping slide tiles", clustered_codes(n))):
            started = time.perf_counter()
            left, _, _ = pairs_within(codes, radius)
            ours = time.perf_counter() - started
            started = time.perf_counter()
            brute = all_pairs_numpy(codes, radius)
            numpy_seconds = time.perf_counter() - started
            assert brute == len(left), (brute, len(left))  # the index is exact
            try:
                import faiss

                index = faiss.IndexBinaryFlat(256)
                index.add(codes)
                started = time.perf_counter()
                index.range_search(codes, radius + 1)  # faiss keeps distances < radius
                faiss_text = f"{time.perf_counter() - started:.2f}"
            except ImportError:
                faiss_text = "not installed"
            lines.append(f"| {len(codes)} | {kind} | {len(left)} | {ours:.2f} | {numpy_seconds:.2f} | {faiss_text} | "
                         f"{numpy_seconds / ours:.1f}× |")
    return lines


def pathological_cost(n: int = 78_000) -> list[str]:
    """`link_within` on codes real data can produce in bulk (the build's components, not every pair): near-copies of
    one frame (empty fields, blank slide tiles with a vignette), codes sharing their low DCT bits (smooth images),
    and random codes. Counted comparisons and traced peak memory; seconds on one core for orientation."""
    import tracemalloc

    from mmbu.build.duplicates.index import LinkStats, link_within

    rng = np.random.default_rng(1)
    frame = rng.integers(0, 256, 32, dtype=np.uint8)

    def near_copies(count: int, most: int) -> np.ndarray:
        bits = np.tile(np.unpackbits(frame), (count, 1))
        flips = rng.integers(0, most + 1, count)
        for row, flip in zip(bits, flips):
            row[rng.choice(256, int(flip), replace=False)] ^= 1
        return np.packbits(bits, axis=1)

    smooth = rng.integers(0, 256, (n, 32), dtype=np.uint8)
    smooth[:, :3] = frame[:3]  # the first 24 bits (lowest frequencies) shared by every image
    inputs = {"random": rng.integers(0, 256, (n, 32), dtype=np.uint8),
              "low DCT bits shared by all": smooth,
              f"{n // 4:,} near-copies (≤ 8 bits) of one frame + random": np.concatenate(
                  [near_copies(n // 4, 8), rng.integers(0, 256, (n - n // 4, 32), dtype=np.uint8)]),
              f"{n // 4:,} identical codes + random": np.concatenate(
                  [np.tile(frame, (n // 4, 1)), rng.integers(0, 256, (n - n // 4, 32), dtype=np.uint8)])}
    lines = ["| codes | components > 1 | comparisons | all pairs | skipped | peak traced MiB | s |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for name, codes in inputs.items():
        stats = LinkStats()
        started = time.perf_counter()
        labels = link_within(codes, 24, stats=stats)
        seconds = time.perf_counter() - started
        tracemalloc.start()  # a second run for the memory: tracing slows numpy's allocations several times
        link_within(codes, 24)
        peak = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
        groups = int((np.bincount(labels) > 1).sum())
        lines.append(f"| {len(codes):,} {name} | {groups} | {stats.comparisons:,} | {len(codes) * (len(codes) - 1) // 2:,} "
                     f"| {stats.capped_comparisons:,} | {peak:.0f} | {seconds:.1f} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="40 H&E tiles, a 10K index, few hashing rounds")
    parser.add_argument("--index-sizes", default="20000,78000")
    parser.add_argument("--write-results", action="store_true", help=f"replace the '{HEADING}' section of RESULTS.md")
    parser.add_argument("--pathological", action="store_true",
                        help="only the component search on pathological codes (near-copies by the thousand)")
    args = parser.parse_args()
    from mmbu.build.duplicates.resolve import DEFAULT_MAX_DISTANCE

    if args.pathological:
        print("\n".join(pathological_cost()))
        return

    load = os.getloadavg()
    groups = corpus(args.quick)
    names = list(hashers())
    measured = distances(groups, names)
    threshold_for = {name: (DEFAULT_MAX_DISTANCE if measured[name][next(iter(groups))].get("bits", 256) == 256
                            else DEFAULT_MAX_DISTANCE // 4) for name in measured}
    sizes = [10000] if args.quick else [int(s) for s in args.index_sizes.split(",")]
    counts = {g: len(items) for g, items in groups.items()}
    section = "\n".join([
        HEADING, "",
        f"`benchmarks/duplicates.py{' --quick' if args.quick else ''}` (see its docstring for the images and copies): "
        + ", ".join(f"{n} {g}" for g, n in counts.items())
        + f" originals. Machine load {load[0]:.1f}/{load[1]:.1f}/{load[2]:.1f} (1/5/15 min, 2 cores) at the start.", "",
        "**Which hash.** Share of copies found, each hash at the build's threshold (scaled to 64-bit hashes: "
        f"{DEFAULT_MAX_DISTANCE // 4} of 64), and distinct originals of one group that would be taken for copies:", "",
        *recall_table(measured, threshold_for), "",
        "**Which threshold** (the build's two pHashes, copies other than crops):", "",
        *threshold_sweep(measured), "",
        "**Cost of hashing** (`image_hashes`, CPU time; it runs in each dataset's worker and is cached per PNG):", "",
        *hashing_cost(20 if args.quick else 60), "",
        f"**Cost of the range search** (radius {DEFAULT_MAX_DISTANCE} of 256, one core; run twice per build, once "
        "per hash):", "",
        *index_cost(sizes, DEFAULT_MAX_DISTANCE),
    ])
    print(section)
    if args.write_results:
        from benchmarks import replace_results_section

        replace_results_section(HEADING, section)


if __name__ == "__main__":
    main()
