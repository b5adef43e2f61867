"""Small files that declare many GiB (issue 32, point 3): every reader checks what a header declares against one
budget (`mmbu.core.budget`) before it allocates, and an item over it is one sentence naming the file, the declared
size and the setting; the rest of the batch goes on, memory stays small and nothing hangs.

Each attack is built small on disk (sparse files, deflated zeros, headers alone) but declares the huge size; the
command or layout runs in a fresh process whose peak memory is measured (`support.peak_memory`). Where the huge
size cannot be declared cheaply (a Parquet cell of 1 GiB must be written to exist), the budget is lowered instead.
"""
from __future__ import annotations

import json
import struct
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
from numpy.lib import format as npy_format
from PIL import Image
from support.build_manifests import make_manifest, write_png
from support.peak_memory import MIB, run_measured

from mmbu.build.layouts import read_samples

SMALL = 450 * MIB  # KiB: Python with numpy, pyarrow, SimpleITK and the layouts loaded, nothing else held
TASKS = ["mask_grounded_classification"]

CONVERT = """
import json, subprocess, sys
done = subprocess.run([sys.executable, "-m", "mmbu", "convert", {source!r}, "--out", {out!r}],
                      capture_output=True, text=True)
ANSWER = {{"code": done.returncode, "stderr": done.stderr[-2000:],
          "report": [json.loads(line) for line in open({out!r} + "/convert-report.jsonl")]}}
"""

LAYOUT = """
import json
from mmbu.build.layouts import read_samples
from mmbu.curation.manifest import DatasetManifest
manifest = DatasetManifest.model_validate_json({manifest!r})
samples, exclusions = read_samples(manifest, {raw!r}, {cache!r})
ANSWER = {{"samples": len(samples), "exclusions": [[e.item, e.reason] for e in exclusions]}}
"""


def _convert_peak(source: Path, out: Path, env: dict | None = None) -> tuple[dict, int]:
    """`mmbu convert source` run by a fresh process: (its answer, the peak of the whole tree in KiB)."""
    probe = CONVERT.format(source=str(source), out=str(out)) + (
        "import resource\nANSWER['peak_kib'] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss\n")
    measured = run_measured(probe, env=env)
    return measured.answer, max(measured.peak_kib, measured.answer["peak_kib"])


def _layout(manifest, raw: Path, cache: Path, env: dict | None = None) -> tuple[dict, int]:
    measured = run_measured(LAYOUT.format(manifest=manifest.model_dump_json(), raw=str(raw), cache=str(cache)),
                            env=env)
    return measured.answer, measured.peak_kib


def _sparse(path: Path, size: int, head: bytes = b"") -> Path:
    """A file of `size` bytes after `head` that holds no data blocks (reads as zeros, costs no disk)."""
    with open(path, "wb") as handle:
        handle.write(head)
        handle.truncate(len(head) + size)
    return path


def _blank_png(path: Path, side: int, mode: str) -> Path:
    """A blank PNG of side² pixels written by Pillow in its own process (its pixels are freed with it)."""
    subprocess.run([sys.executable, "-c", f"from PIL import Image; Image.new({mode!r}, ({side}, {side})).save("
                    f"{str(path)!r}, compress_level=9)"], check=True, timeout=120)
    return path


def _one_error(answer: dict, *needles: str) -> str:
    assert answer["code"] == 1, answer["stderr"]
    record, = answer["report"]
    assert record["status"] == "error" and record["output"] is None
    for needle in needles:
        assert needle in record["error"], record["error"]
    assert "Traceback" not in answer["stderr"]
    return record["error"]


# --- converters ------------------------------------------------------------------------------------------------

def test_a_150_byte_metaimage_header_declaring_a_billion_slices_is_refused_from_its_header(tmp_path):
    header = tmp_path / "deep.mha"
    header.write_bytes(b"ObjectType = Image\nNDims = 3\nDimSize = 4 4 1000000000\nElementType = MET_UCHAR\n"
                       b"ElementDataFile = LOCAL\n")
    assert header.stat().st_size < 150
    answer, peak = _convert_peak(header, tmp_path / "out")
    _one_error(answer, "deep.mha declares 1,000,000,000 slices", "MMBU_MAX_SLICES")
    assert peak < SMALL, f"peak {peak // 1024} MiB"


def test_an_nrrd_header_declaring_a_billion_slices_is_refused_from_its_header(tmp_path):
    header = tmp_path / "deep.nrrd"
    header.write_bytes(b"NRRD0004\ntype: uint8\ndimension: 3\nsizes: 4 4 1000000000\nencoding: raw\n\n" + bytes(64))
    answer, peak = _convert_peak(header, tmp_path / "out")
    _one_error(answer, "deep.nrrd declares 1,000,000,000 slices", "MMBU_MAX_SLICES")
    assert peak < SMALL, f"peak {peak // 1024} MiB"


def test_a_header_whose_data_file_pattern_names_a_billion_slices_is_refused_before_the_names_are_made(tmp_path):
    """`ElementDataFile = s%d.raw 1 1000000000 1`: the names alone held 3.5 GB before ITK was asked anything."""
    (tmp_path / "s1.raw").write_bytes(bytes(16))
    (tmp_path / "pattern.mhd").write_bytes(b"ObjectType = Image\nNDims = 3\nDimSize = 4 4 1000000000\n"
                                           b"ElementType = MET_UCHAR\nElementDataFile = s%d.raw 1 1000000000 1\n")
    answer, peak = _convert_peak(tmp_path / "pattern.mhd", tmp_path / "out")
    _one_error(answer, "pattern.mhd declares 1,000,000,000 data files", "MMBU_MAX_SLICES")
    assert peak < SMALL, f"peak {peak // 1024} MiB"


def test_sparse_volumes_of_50000_squared_are_refused_before_a_section_is_read(tmp_path):
    """MetaImage and MRC files of 2.5 GB that hold no data blocks: the section shown would be all of it."""
    _sparse(tmp_path / "plane.raw", 50000 * 50000)
    (tmp_path / "plane.mhd").write_bytes(b"ObjectType = Image\nNDims = 2\nDimSize = 50000 50000\n"
                                         b"ElementType = MET_UCHAR\nElementDataFile = plane.raw\n")
    answer, peak = _convert_peak(tmp_path / "plane.mhd", tmp_path / "out_mhd")
    _one_error(answer, "50,000 × 50,000 pixels (2,500,000,000)", "MMBU_MAX_PIXELS")
    assert peak < SMALL, f"peak {peak // 1024} MiB"

    import mrcfile

    with mrcfile.new(tmp_path / "small.mrc") as mrc:
        mrc.set_data(np.zeros((1, 4, 4), np.int8))
    header = bytearray((tmp_path / "small.mrc").read_bytes()[:1024])
    struct.pack_into("<3i", header, 0, 50000, 50000, 1)  # nx, ny, nz
    struct.pack_into("<3i", header, 28, 50000, 50000, 1)  # mx, my, mz
    _sparse(tmp_path / "section.mrc", 50000 * 50000, bytes(header))
    answer, peak = _convert_peak(tmp_path / "section.mrc", tmp_path / "out_mrc")
    _one_error(answer, "section.mrc declares a section of 50,000 × 50,000 pixels", "MMBU_MAX_PIXELS")
    assert peak < SMALL, f"peak {peak // 1024} MiB"


def test_a_13000_squared_png_is_refused_from_its_header_and_pillows_guard_stays_on(tmp_path):
    """169 MP: under Pillow's refusal point (2 × MAX_IMAGE_PIXELS) but 2.2 GiB decoded as RGBA; the budget is
    Pillow's own MAX_IMAGE_PIXELS."""
    from PIL import Image as PillowImage

    _blank_png(tmp_path / "big.png", 13000, "RGBA")
    assert (tmp_path / "big.png").stat().st_size < 4_000_000
    answer, peak = _convert_peak(tmp_path / "big.png", tmp_path / "out")
    _one_error(answer, "big.png declares an image of 13,000 × 13,000 pixels (169,000,000)",
               "the 89,478,485 pixels one plane may have (MMBU_MAX_PIXELS)")
    assert peak < SMALL, f"peak {peak // 1024} MiB"
    assert PillowImage.MAX_IMAGE_PIXELS == 89_478_485  # the guard is on, and the budget's default is its value


def test_the_budget_is_a_setting_of_the_environment(tmp_path):
    write_png(tmp_path / "small.png", (64, 48))
    answer, _ = _convert_peak(tmp_path / "small.png", tmp_path / "out", env={"MMBU_MAX_PIXELS": "1000"})
    _one_error(answer, "64 × 48 pixels (3,072), more than the 1,000 pixels")
    done = subprocess.run([sys.executable, "-m", "mmbu", "convert", str(tmp_path / "small.png"), "--out",
                           str(tmp_path / "out2")], capture_output=True, text=True,
                          env={**__import__("os").environ, "MMBU_MAX_PIXELS": "lots"})
    assert done.returncode == 2 and "MMBU_MAX_PIXELS='lots' is not a positive whole number" in done.stderr
    assert "Traceback" not in done.stderr


# --- layouts ---------------------------------------------------------------------------------------------------

def _file_arrays_manifest(images: str, key: str | None = None):
    ref = {"file": images, **({"key": key} if key else {})}
    return make_manifest({"kind": "arrays", "items": "file", "axes": "HW", "images": ref,
                          "masks": {"file": "masks/{stem}.npy"}, "instances": "ids", "instance_label": "nucleus"},
                         labels={"nucleus": "nucleus"}, tasks=TASKS)


@pytest.mark.parametrize("kind", ["npy", "hdf5", "npz"])
def test_sparse_and_deflated_arrays_declaring_gigabytes_are_excluded_before_they_are_read(tmp_path, kind):
    """A sparse .npy and an HDF5 dataset of 50000² (chunks never written read as zeros), a deflated .npz member
    of 40000² (1.6 GB of zeros in 7 MB): each is one exclusion naming the file and the declared size."""
    raw = tmp_path / "raw"
    (raw / "images").mkdir(parents=True)
    (raw / "masks").mkdir()
    key = None
    if kind == "npy":
        name, side = "images/big.npy", 50000
        with open(raw / name, "wb") as handle:
            npy_format.write_array_header_1_0(handle, {"descr": "|u1", "fortran_order": False,
                                                       "shape": (side, side)})
            handle.truncate(handle.tell() + side * side)
    elif kind == "hdf5":
        import h5py

        name, side, key = "images/big.h5", 50000, "image"
        with h5py.File(raw / name, "w") as handle:
            handle.create_dataset("image", shape=(side, side), dtype="u1", chunks=(1000, 1000), compression="gzip")
    else:
        name, side, key = "images/big.npz", 40000, "image"
        # deflate's fastest level: the same member, 7 MB instead of 1.6 MB, written in a third of the CPU time
        with zipfile.ZipFile(raw / name, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as archive, \
                archive.open("image.npy", "w", force_zip64=True) as member:
            npy_format.write_array_header_1_0(member, {"descr": "|u1", "fortran_order": False,
                                                       "shape": (side, side)})
            zeros = bytes(16 << 20)
            for _ in range(side * side // len(zeros)):
                member.write(zeros)
            member.write(zeros[: side * side % len(zeros)])
    np.save(raw / "masks" / "big.npy", np.zeros((4, 4), np.uint8))
    manifest = _file_arrays_manifest("images/{stem}." + name.rsplit(".", 1)[1], key)
    answer, peak = _layout(manifest, raw, tmp_path / "cache")
    assert answer["samples"] == 0
    (item, reason), = answer["exclusions"]
    assert item.startswith("images/big") and f"{side:,} × {side:,} pixels" in reason and "MMBU_MAX_PIXELS" in reason
    assert peak < SMALL, f"peak {peak // 1024} MiB"


def _parquet_with_cell(path: Path, cell: bytes | str, column_type) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({"image": pa.array([cell], column_type), "label": pa.array(["MON"])})
    pq.write_table(table, path, compression="zstd")


@pytest.mark.parametrize("encoding", ["bytes", "base64"])
def test_a_parquet_cell_over_the_budget_is_refused_from_the_row_groups_declared_size(tmp_path, encoding):
    """A 1 GiB cell of zeros is ~33 KB of zstd (and an 800 MB base64 cell as small), but writing one takes 7 GB:
    the same file at 8 MiB against a budget of 4 MiB shows the row group refused from its footer, before a page
    is decompressed."""
    import pyarrow as pa

    raw = tmp_path / "raw" / "data"
    raw.mkdir(parents=True)
    cell = bytes(8 << 20) if encoding == "bytes" else "A" * (8 << 20)
    _parquet_with_cell(raw / "train.parquet", cell, pa.binary() if encoding == "bytes" else pa.string())
    assert (raw / "train.parquet").stat().st_size < 100_000
    layout = {"kind": "parquet", "files": "data/*.parquet", "label_column": "label",
              **({"image_encoding": "base64"} if encoding == "base64" else {})}
    answer, peak = _layout(make_manifest(layout), tmp_path / "raw", tmp_path / "cache",
                           env={"MMBU_MAX_BYTES": str(4 << 20)})
    (item, reason), = answer["exclusions"]
    assert item == "data/train.parquet" and answer["samples"] == 0
    assert reason.startswith("train.parquet (row group 0) declares 1 row(s) of the column(s) image, label, "
                             "uncompressed: 8.0 MiB") and "MMBU_MAX_BYTES" in reason
    assert peak < SMALL, f"peak {peak // 1024} MiB"


def test_a_labelme_canvas_of_13000_squared_is_excluded_before_it_is_drawn(tmp_path):
    raw = tmp_path / "raw"
    (raw / "ann").mkdir(parents=True)
    _blank_png(raw / "ann" / "huge.png", 13000, "L")
    (raw / "ann" / "huge.json").write_text(json.dumps({
        "imagePath": "huge.png", "imageWidth": 13000, "imageHeight": 13000,
        "shapes": [{"label": "cell", "points": [[0, 0], [12999, 0], [12999, 12999]], "shape_type": "polygon"}] * 3}))
    manifest = make_manifest({"kind": "polygons", "format": "labelme_json", "annotations": "ann/*.json"},
                             labels={"cell": "cell"}, tasks=TASKS)
    answer, peak = _layout(manifest, raw, tmp_path / "cache")
    (item, reason), = answer["exclusions"]
    assert item == "ann/huge.png" and "an instance mask of 13,000 × 13,000 pixels (169,000,000)" in reason
    assert peak < SMALL, f"peak {peak // 1024} MiB"


def test_a_coco_segmentation_of_60_million_numbers_is_refused_before_it_is_parsed(tmp_path):
    """120 MB of JSON whose one polygon holds 60 M numbers: ~2 GiB once parsed into Python objects."""
    raw = tmp_path / "raw"
    write_png(raw / "img" / "a.png")
    with open(raw / "ann.json", "wb") as handle:
        handle.write(b'{"images": [{"id": 1, "file_name": "a.png", "width": 32, "height": 24}], '
                     b'"categories": [{"id": 1, "name": "MON"}], "annotations": [{"id": 1, "image_id": 1, '
                     b'"category_id": 1, "bbox": [1, 1, 4, 4], "segmentation": [[')
        block = b"1," * (1 << 20)
        for _ in range(60_000_000 // (1 << 20)):
            handle.write(block)
        handle.write(b"1]]}]}")
    manifest = make_manifest({"kind": "coco", "annotations": "ann.json", "image_root": "img"},
                             tasks=["box_grounded_classification"])
    answer, peak = _layout(manifest, raw, tmp_path / "cache")
    (item, reason), = answer["exclusions"]
    assert item == "ann.json" and "JSON values" in reason and "MMBU_MAX_JSON_VALUES" in reason
    assert peak < SMALL, f"peak {peak // 1024} MiB"


def _long_video(path: Path) -> Path:
    """An MKV of two 16×16 frames whose Segment Info declares a duration of 10^7 s (EBML float, ms scale)."""
    import av

    with av.open(str(path), "w") as container:
        stream = container.add_stream("mpeg4", rate=25)
        stream.width = stream.height = 16
        stream.pix_fmt = "yuv420p"
        for _ in range(2):
            container.mux(stream.encode(av.VideoFrame.from_ndarray(np.zeros((16, 16, 3), np.uint8), format="rgb24")))
        container.mux(stream.encode())
    data = bytearray(path.read_bytes())
    duration = data.find(b"\x44\x89\x88")  # Duration, an 8-byte float
    struct.pack_into(">d", data, duration + 3, 1e10)
    path.write_bytes(data)
    return path


def test_a_tiny_video_declaring_ten_million_seconds_lists_no_frames_and_says_why(tmp_path):
    raw = tmp_path / "raw" / "MON"
    raw.mkdir(parents=True)
    video = _long_video(raw / "long.mkv")
    assert video.stat().st_size < 1000
    manifest = make_manifest({"kind": "folder_per_class"}, convert={"video": {"every_seconds": 1.0}})
    answer, peak = _layout(manifest, tmp_path / "raw", tmp_path / "cache")
    (item, reason), = answer["exclusions"]
    assert item == "MON/long.mkv" and answer["samples"] == 0
    assert "declares 10,000,000 frames (one every 1 s of 1e+07 s)" in reason and "max_frames" in reason
    assert peak < SMALL, f"peak {peak // 1024} MiB"


def test_a_mask_of_65535_instance_ids_is_one_exclusion_and_listing_them_is_linear(tmp_path):
    """Listing regions compared every id with every pixel (ids × pixels: past ten minutes); now one pass. Over the
    instance budget the mask is one exclusion; with the budget raised all 65,535 are listed."""
    raw = tmp_path / "raw"
    write_png(raw / "images" / "a.png", (1024, 1024))
    mask = np.zeros((1024, 1024), np.uint16)
    mask.ravel()[: 65535 * 16: 16] = np.arange(1, 65536, dtype=np.uint16)
    (raw / "masks").mkdir()
    Image.fromarray(mask).save(raw / "masks" / "a_mask.png")
    manifest = make_manifest({"kind": "image_mask_pairs", "images": "images/*.png", "masks": "masks/*",
                              "mask_suffix": "_mask", "instances": "ids", "instance_label": "nucleus",
                              "mask_values": {}}, labels={"nucleus": "nucleus"}, tasks=TASKS)
    answer, _ = _layout(manifest, raw, tmp_path / "cache")
    (item, reason), = answer["exclusions"]
    assert item == "masks/a_mask.png" and "declares 65,535 objects, more than the 10,000" in reason
    assert "MMBU_MAX_INSTANCES" in reason and answer["samples"] == 0
    probe = LAYOUT.format(manifest=manifest.model_dump_json(), raw=str(raw), cache=str(tmp_path / "cache")) + \
        "ANSWER['regions'] = len(samples[0].regions)\n"
    measured = run_measured(probe, env={"MMBU_MAX_INSTANCES": "70000"}, timeout=120)
    assert measured.answer["regions"] == 65535 and not measured.answer["exclusions"]


def test_a_manifest_may_lower_the_budget_for_its_dataset_but_never_raise_it(tmp_path):
    import yaml
    from pydantic import ValidationError
    from support.build_manifests import write_taxonomy

    from mmbu.build.steps import DatasetJob, process_dataset
    from mmbu.curation.manifest import DatasetManifest

    write_png(tmp_path / "data" / "raw" / "demo_marrow" / "MON" / "a.png", (64, 48))
    document = {**make_manifest({"kind": "folder_per_class"}).model_dump(mode="json", exclude_none=True),
                "budget": {"max_pixels": 1000}}
    manifest_path = tmp_path / "demo_marrow.yaml"
    manifest_path.write_text(yaml.safe_dump(document), encoding="utf-8")
    write_taxonomy(tmp_path)
    outcome = process_dataset(DatasetJob(manifest_path=manifest_path, data_dir=tmp_path / "data",
                                         taxonomy_path=tmp_path / "taxonomy.yaml"))
    reasons = [e["reason"] for e in outcome.exclusions]
    assert any("64 × 48 pixels (3,072), more than the 1,000 pixels one plane may have" in r for r in reasons), reasons
    with pytest.raises(ValidationError, match="a manifest may only lower the budget"):
        DatasetManifest.model_validate({**document, "budget": {"max_pixels": 10**12}})
