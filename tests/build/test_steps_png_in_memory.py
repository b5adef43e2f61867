"""The convert step takes what it notes about each PNG from the bytes and pixels it just wrote, not from reading
the file back: the size and CRC its resume record notes, and the PNG's perceptual hashes. Sources written by
Pillow."""
from __future__ import annotations

import json
import os
import sqlite3
import zlib
from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image

from support.build_repo import config_for, make_repo

from mmbu.build.convert.base import ConvertOptions
from mmbu.build.convert.batch import convert_keeping_png, convert_one
from mmbu.build.convert_resume import RESUME_FILE
from mmbu.build.duplicates.check import HASHES_FILE
from mmbu.build.duplicates.hashing import ImageHashes, hashes_from_json, image_hashes
from mmbu.build.duplicates.table import CONVERTED_HASHES_FILE, load_converted_hashes
from mmbu.build.pipeline import run_build


def test_the_png_bytes_and_pixels_kept_in_memory_are_those_of_the_file(tmp_path):
    rng = np.random.default_rng(3)
    sources = {
        "grey.png": Image.fromarray(rng.integers(0, 256, (30, 41), dtype=np.uint8)),
        "colour.png": Image.fromarray(rng.integers(0, 256, (33, 20, 3), dtype=np.uint8)),
        "deep.png": Image.fromarray(rng.integers(0, 65536, (25, 37), dtype=np.uint16)),  # 16-bit: windowed to 8
    }
    for name, image in sources.items():
        image.save(tmp_path / name)
        made = convert_keeping_png(tmp_path / name, tmp_path / "out" / name, ConvertOptions())
        assert made.record["status"] == "ok", made.record
        assert made.data == (tmp_path / "out" / name).read_bytes()
        with Image.open(tmp_path / "out" / name) as written:
            assert written.mode == ("RGB" if name == "colour.png" else "L")
            assert np.array_equal(np.asarray(written), made.pixels)
        assert convert_one(tmp_path / name, tmp_path / "again.png", ConvertOptions()) == made.record | {
            "output": str(tmp_path / "again.png")}


def test_a_failed_conversion_keeps_nothing(tmp_path):
    (tmp_path / "bad.png").write_bytes(b"\x89PNG\r\n\x1a\n not a png")
    made = convert_keeping_png(tmp_path / "bad.png", tmp_path / "out.png", ConvertOptions())
    assert made.record["status"] == "error" and made.record["error"]
    assert made.data is None and made.pixels is None


def _resume_records(work: Path) -> dict[str, tuple]:
    with sqlite3.connect(work / RESUME_FILE) as db:
        return {row[0]: row[1:] for row in db.execute("SELECT path, size, crc32, hashes FROM png")}


def test_each_resume_record_notes_the_size_and_crc_of_its_png_as_on_disk(tmp_path):
    make_repo(tmp_path)
    assert run_build(config_for(tmp_path)).exit_code == 0
    pngs = sorted((tmp_path / "data" / "work").glob("*/images/*.png"))
    assert len(pngs) == 10
    records = {path: row for work in (tmp_path / "data" / "work").iterdir() if work.is_dir()
               for path, row in _resume_records(work).items()}
    assert sorted(records) == [str(p) for p in pngs]
    for png in pngs:
        data = png.read_bytes()
        size, crc, hashes = records[str(png)]
        assert (size, crc) == (len(data), zlib.crc32(data))
        assert hashes_from_json(json.loads(hashes)) == image_hashes(png)
    assert not list((tmp_path / "data" / "work").glob("*/images/*.json"))  # no file per PNG beside it


def _tables(root: Path) -> dict[str, pd.DataFrame]:
    return {work.name: pd.read_parquet(work / HASHES_FILE) for work in sorted((root / "data" / "work").iterdir())
            if work.is_dir()}


def _as_read_from_the_png(table: pd.DataFrame, root: Path) -> bool:
    """Each image's hashes in the table are those `image_hashes` reads from its PNG (named after its image id)."""
    return all(image_hashes(root / "data" / "work" / row.dataset_id / "images" / f"{row.image_id}.png") == ImageHashes(
        row.grey, row.equalised, row.sha256, row.width, row.height, row.structure) for row in table.itertuples())


def test_the_hashes_step_takes_the_convert_steps_hashes_while_the_png_is_unchanged(tmp_path):
    make_repo(tmp_path)
    assert run_build(config_for(tmp_path)).exit_code == 0
    work = tmp_path / "data" / "work" / "cells"
    saved = load_converted_hashes(work / CONVERTED_HASHES_FILE)
    assert sorted(saved) == sorted(str(p) for p in (work / "images").glob("*.png")) and len(saved) == 8
    tables = _tables(tmp_path)
    assert all(_as_read_from_the_png(table, tmp_path) for table in tables.values())
    assert len(tables["nuclei"]["image_id"].unique()) == 2

    # Tell the two paths apart: doctor the convert step's grey hash of two PNGs, then touch one of them. The
    # hashes step (re-run: its table is gone) takes the doctored bits of the untouched PNG without opening it,
    # and reads the touched one again, since its key (size, mtime) is no longer the one the hashes were taken with.
    *entries, trailer = (work / CONVERTED_HASHES_FILE).read_text(encoding="utf-8").splitlines()
    document = {entry["png"]: entry for entry in map(json.loads, entries)}
    untouched, touched = sorted(document)[:2]
    for png in (untouched, touched):
        document[png]["grey"] = "ff" * 32
    (work / CONVERTED_HASHES_FILE).write_text("".join(json.dumps(e) + "\n" for e in document.values()) + trailer + "\n",
                                              encoding="utf-8")
    os.utime(touched, ns=(Path(touched).stat().st_atime_ns, Path(touched).stat().st_mtime_ns + 10**9))
    (work / HASHES_FILE).unlink()
    report = run_build(config_for(tmp_path))
    assert report.exit_code == 0 and {o.dataset_id: o.ran for o in report.datasets}["cells"] == ["hashes"]
    table = _tables(tmp_path)["cells"].set_index("image_id")
    assert table.loc[Path(untouched).stem, "grey"] == b"\xff" * 32
    assert table.loc[Path(touched).stem, "grey"] == image_hashes(Path(touched)).grey != b"\xff" * 32


def test_pngs_reused_from_records_without_hashes_are_hashed_from_the_file(tmp_path, monkeypatch):
    """A build resumed over PNGs whose resume records carry no hashes (of another HASH_VERSION, say) reuses the PNGs
    and reads them in the hashes step."""
    from mmbu.build import steps

    make_repo(tmp_path)
    assert run_build(config_for(tmp_path)).exit_code == 0
    pngs = sorted((tmp_path / "data" / "work").glob("*/images/*.png"))
    made = {p: p.stat().st_mtime_ns for p in pngs}
    for work in (tmp_path / "data" / "work").iterdir():
        if work.is_dir():
            with sqlite3.connect(work / RESUME_FILE) as db:
                db.execute("UPDATE png SET hashes = json_set(hashes, '$.version', -1)")
    for table in (tmp_path / "data" / "work").glob(f"*/{HASHES_FILE}"):
        table.unlink()  # no previous table either: every hash must come from the PNGs
    monkeypatch.setattr(steps, "STEPS_FORMAT", steps.STEPS_FORMAT + 1)
    report = run_build(config_for(tmp_path))
    assert report.exit_code == 0 and all(o.ran == ["layout", "select", "convert", "rows", "hashes"] for o in report.datasets)
    assert {p: p.stat().st_mtime_ns for p in pngs} == made  # reused, not converted again
    assert all(load_converted_hashes(w / CONVERTED_HASHES_FILE) == {} for w in (tmp_path / "data" / "work").iterdir()
               if w.is_dir())
    tables = _tables(tmp_path)
    assert sum(len(t["image_id"].unique()) for t in tables.values()) == 10
    assert all(_as_read_from_the_png(table, tmp_path) for table in tables.values())
