"""`mmbu convert` end to end: a mixed batch with bad files, the report contract, exit codes."""
import contextlib
import json
import os
import shutil
import sys
import tempfile
import zipfile
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from PIL import Image
from pydicom.data import get_testdata_file

sys.path.insert(0, str(Path(__file__).parent))
import factories_dicom as fd  # noqa: E402
import factories_raster as fr  # noqa: E402

from mmbu.build.convert.base import ConvertOptions  # noqa: E402
from mmbu.build.convert.batch import convert_one, convert_paths, walk_sources  # noqa: E402
from mmbu.cli import cli  # noqa: E402

REPORT_KEYS = {"source", "output", "status", "error", "format", "width", "height", "mode", "frame", "params"}
CT_STORED = np.array([[0, 864, 1064, 1263, 4095]], np.uint16).repeat(4, axis=0)


def run(*args):
    return CliRunner().invoke(cli, ["convert", *map(str, args)])


def read_report(path):
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


@pytest.fixture
def mixed_inputs(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    fd.write_ct(src / "ct.dcm", CT_STORED, window=(40, 400))
    fd.write_ct(src / "disguised.png", CT_STORED, window=(40, 400))  # DICOM with a PNG name
    fd.write_multiframe(src / "cine.dcm", np.stack([np.full((8, 8), 1000 + 200 * k, np.uint16) for k in range(3)]))
    Image.new("RGB", (30, 20), (10, 120, 200)).save(src / "photo.jpg")
    (src / "empty.dcm").touch()
    truncated = fr.write_jpeg_with_orientation(src / "truncated.jpg", orientation=1, size=(256, 256))
    truncated.write_bytes(truncated.read_bytes()[:700])
    shutil.copy(get_testdata_file("JPGExtended.dcm"), src / "jpeg12.dcm")  # unsupported compression
    corrupt = fd.write_ct(src / "corrupt.dcm", fd.ct_ramp(64, 64))
    corrupt.write_bytes(corrupt.read_bytes()[:-3000])
    with zipfile.ZipFile(src / "bundle.zip", "w") as bundle:
        bundle.writestr("x.png", b"x")
    fr.write_encrypted_zip(src / "locked.zip")
    fr.write_encrypted_pdf(src / "locked.pdf")
    return src


def test_mixed_batch_reports_every_source_and_exits_1(tmp_path, mixed_inputs):
    out = tmp_path / "out"
    result = run(mixed_inputs, "--out", out)
    assert result.exit_code == 1, result.output
    records = {Path(r["source"]).name: r for r in read_report(out / "convert-report.jsonl")}
    assert len(records) == 11
    for record in records.values():
        assert set(record) == REPORT_KEYS
        if record["status"] == "ok":
            png = Image.open(record["output"])
            assert png.format == "PNG" and png.mode == record["mode"]
            assert png.size == (record["width"], record["height"])
        else:
            assert record["output"] is None and record["error"].count(".") >= 1
    ok = {name for name, r in records.items() if r["status"] == "ok"}
    assert ok == {"ct.dcm", "disguised.png", "cine.dcm", "photo.jpg"}
    assert records["disguised.png"]["format"] == "dicom"
    assert np.asarray(Image.open(out / "disguised.png"))[0].tolist() == [0, 0, 128, 255, 255]
    assert records["cine.dcm"]["frame"] == 1 and records["ct.dcm"]["frame"] is None
    assert records["ct.dcm"]["params"]["window"]["source"] == "file window"
    assert "empty (0 bytes)" in records["empty.dcm"]["error"]
    assert "truncated or corrupt" in records["truncated.jpg"]["error"]
    assert "truncated or corrupt" in records["corrupt.dcm"]["error"]
    assert "could not be decoded" in records["jpeg12.dcm"]["error"]
    assert "zip archive" in records["bundle.zip"]["error"]
    assert "encrypted zip archive" in records["locked.zip"]["error"]
    assert "encrypted PDF" in records["locked.pdf"]["error"]
    # nothing half-written: only complete PNGs and the report, no temporary files
    assert sorted(p.name for p in out.iterdir()) == sorted(
        ["convert-report.jsonl", "ct.png", "disguised.png", "cine.png", "photo.png"]  # locked.* got no PNG
    )
    assert "failed:" in result.output


def test_parallel_jobs_give_the_same_outputs(tmp_path, mixed_inputs):
    serial = convert_paths([mixed_inputs], tmp_path / "serial", jobs=1)
    parallel = convert_paths([mixed_inputs], tmp_path / "parallel", report_path=tmp_path / "p.jsonl", jobs=2)
    assert [r["status"] for r in serial] == [r["status"] for r in parallel]
    for a, b in zip(serial, parallel):
        if a["status"] == "ok":
            assert Path(a["output"]).name == Path(b["output"]).name
            assert Path(a["output"]).read_bytes() == Path(b["output"]).read_bytes()
    assert len(read_report(tmp_path / "p.jsonl")) == len(parallel)


def test_all_good_exits_0_and_names_clashes_uniquely(tmp_path):
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        fd.write_ct(tmp_path / folder / "scan.dcm", CT_STORED)
    Image.new("L", (5, 5)).save(tmp_path / "a" / "Scan.png")
    report = tmp_path / "reports" / "run.jsonl"
    result = run(tmp_path / "a", tmp_path / "b", "--out", tmp_path / "out", "--report", report, "--max-size", 3)
    assert result.exit_code == 0, result.output
    names = sorted(Path(r["output"]).name for r in read_report(report))
    assert names == ["Scan.png", "scan-2.png", "scan-3.png"]
    assert all(max(r["width"], r["height"]) <= 3 for r in read_report(report))


def test_rerun_replaces_outputs_instead_of_piling_up(tmp_path):
    fd.write_ct(tmp_path / "ct.dcm", CT_STORED)
    for _ in range(2):
        assert run(tmp_path / "ct.dcm", "--out", tmp_path / "out").exit_code == 0
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["convert-report.jsonl", "ct.png"]
    assert len(read_report(tmp_path / "out" / "convert-report.jsonl")) == 1


def test_options_reach_the_readers(tmp_path):
    fd.write_ct(tmp_path / "ct.dcm", CT_STORED, window=(40, 400))
    frames = np.stack([np.full((4, 4), 100 * k, np.uint16) for k in range(4)])
    frames[:, 0, 0] = 4095
    fd.write_multiframe(tmp_path / "mf.dcm", frames)
    result = run(tmp_path / "ct.dcm", tmp_path / "mf.dcm", "--out", tmp_path / "out", "--window", "-600,1500", "--frame", "3")
    assert result.exit_code == 0, result.output
    records = {Path(r["source"]).name: r for r in read_report(tmp_path / "out" / "convert-report.jsonl")}
    assert records["ct.dcm"]["params"]["window"]["source"] == "user"
    assert records["mf.dcm"]["frame"] == 3


@pytest.mark.parametrize("args, words", [
    (["--out"], "requires an argument"),
    (["{src}"], "Missing option '--out'"),
    (["{src}", "--out", "{out}", "--window", "40"], "CENTER,WIDTH"),
    (["{src}", "--out", "{out}", "--window", "40,0"], "width must be positive"),
    (["{src}", "--out", "{out}", "--frame", "last"], "'last' is not an index"),
    (["{src}", "--out", "{out}", "--z", "top"], "'top' is not an index"),
    (["{src}", "--out", "{out}", "--jobs", "0"], "0"),
    (["{src}", "--out", "{out}", "--slice", "mask_max_area"], "--slice-mask"),
    (["{missing}", "--out", "{out}"], "does not exist"),
])
def test_bad_usage_exits_2_without_traceback(tmp_path, args, words):
    fd.write_ct(tmp_path / "ct.dcm", CT_STORED)
    values = {"src": tmp_path / "ct.dcm", "out": tmp_path / "out", "missing": tmp_path / "nope.dcm"}
    result = run(*[arg.format(**values) for arg in args])
    assert result.exit_code == 2
    assert words in result.output
    assert "Traceback" not in result.output


def test_folder_without_files_is_invalid_input(tmp_path):
    (tmp_path / "empty").mkdir()
    result = run(tmp_path / "empty", "--out", tmp_path / "out")
    assert result.exit_code == 2 and "no files to convert were found" in result.output


def test_unreadable_file_is_one_error_line(tmp_path):
    # root reads anything, so drop to an unprivileged effective user for the read when running as root
    folder = Path(tempfile.mkdtemp(prefix="mmbu-perm-"))
    try:
        folder.chmod(0o755)
        locked = fd.write_ct(folder / "locked.dcm", CT_STORED)
        locked.chmod(0o000)
        out = Path(tempfile.mkdtemp(prefix="mmbu-perm-out-"))
        out.chmod(0o777)
        with _unprivileged():
            record = convert_one(locked, out / "locked.png", ConvertOptions())
        assert record["status"] == "error"
        assert record["error"].endswith("locked.dcm cannot be read: permission denied")
        assert not (out / "locked.png").exists()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        shutil.rmtree(out, ignore_errors=True)


@contextlib.contextmanager
def _unprivileged():
    if os.geteuid() != 0:
        yield
        return
    os.setegid(65534)
    os.seteuid(65534)
    try:
        yield
    finally:
        os.seteuid(0)
        os.setegid(0)


def test_walk_skips_output_folder_companions_and_hidden_files(tmp_path):
    (tmp_path / "vol.hdr").write_bytes(b"h")
    (tmp_path / "vol.img").write_bytes(b"i")  # belongs to vol.hdr
    (tmp_path / ".DS_Store").write_bytes(b"x")
    (tmp_path / "slide.mrxs").write_bytes(b"")
    (tmp_path / "slide").mkdir()
    (tmp_path / "slide" / "Data0000.dat").write_bytes(b"d")  # belongs to slide.mrxs
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "old.png").write_bytes(b"p")
    found = [p.name for p in walk_sources([tmp_path], skip=[tmp_path / "out"])]
    assert found == ["slide.mrxs", "vol.hdr"]


def test_directory_holding_one_mrxs_slide_is_one_source(tmp_path):
    case = tmp_path / "case"
    (case / "slide").mkdir(parents=True)
    (case / "slide.mrxs").write_bytes(b"")
    assert walk_sources([case]) == [case]


def crash_on_marker(path, options):
    """A raster reader that kills its process on files named *crash*: what a segfaulting decoder does."""
    if "crash" in Path(path).name:
        os._exit(139)
    from mmbu.build.convert.raster import read

    return read(path, options)


def test_a_worker_killed_by_a_decoder_costs_only_its_file(tmp_path, monkeypatch):
    # fault injection through the reader registry; worker processes are forked, so they see it
    from mmbu.build.convert import base

    monkeypatch.setitem(base.READERS, "raster", f"{__name__}:crash_on_marker")
    src = tmp_path / "src"
    src.mkdir()
    for name in ("a", "b", "crash", "c", "d"):
        Image.new("L", (4, 4), 100).save(src / f"{name}.png")
    records = {Path(r["source"]).stem: r for r in convert_paths([src], tmp_path / "out", jobs=2)}
    assert records["crash"]["status"] == "error"
    assert "converter process crashed while reading" in records["crash"]["error"]
    assert all(records[name]["status"] == "ok" for name in ("a", "b", "c", "d"))
    assert not (tmp_path / "out" / "crash.png").exists()
