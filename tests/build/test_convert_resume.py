"""The convert step's resume records (`build/convert_resume.py`): a PNG is reused only for its own key and only while
it is the file the record describes; a kill keeps what was committed; an unreadable database starts empty."""
from __future__ import annotations

import multiprocessing
import os
import signal

import numpy as np
from PIL import Image

from mmbu.build.convert_resume import ConvertedPngs
from mmbu.build.duplicates.hashing import image_hashes

RECORD = {"status": "ok", "width": 9, "height": 7}


def _png(path, seed=0) -> bytes:
    Image.fromarray(np.random.default_rng(seed).integers(0, 256, (7, 9), dtype=np.uint8)).save(path)
    return path.read_bytes()


def test_a_png_is_reused_for_its_own_key_while_its_bytes_are_those_recorded(tmp_path):
    png = tmp_path / "a.png"
    data = _png(png)
    hashes = image_hashes(png)
    with ConvertedPngs(tmp_path / "r.sqlite") as made:
        assert made.reusable(png, "k1") is None  # nothing recorded yet
        made.remember(png, "k1", RECORD, data, hashes)
    with ConvertedPngs(tmp_path / "r.sqlite") as made:  # a later run reads what the first committed
        assert made.reusable(png, "k1") == (RECORD, hashes)
        assert made.reusable(png, "k2") is None  # made from another source or options
        png.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))  # same size, one bit different
        assert made.reusable(png, "k1") is None
        png.write_bytes(data[:20])
        assert made.reusable(png, "k1") is None
        png.unlink()
        assert made.reusable(png, "k1") is None
        _png(png, seed=1)
        made.remember(png, "k1", RECORD | {"width": 10}, png.read_bytes(), None)  # a mask: no hashes
        assert made.reusable(png, "k1") == (RECORD | {"width": 10}, None)  # the newer record replaces the old


def _remember_then_die(path, pngs) -> None:
    made = ConvertedPngs(path)
    for png in pngs:
        made.remember(png, "k", RECORD, png.read_bytes(), None)
    os.kill(os.getpid(), signal.SIGKILL)  # no commit, no close


def test_a_killed_step_keeps_the_committed_records_and_loses_the_rest(tmp_path):
    pngs = []
    for index in range(100):
        pngs.append(tmp_path / f"{index}.png")
        _png(pngs[-1], seed=index)
    process = multiprocessing.get_context("fork").Process(target=_remember_then_die,
                                                          args=(tmp_path / "r.sqlite", pngs))
    process.start()
    process.join()
    assert process.exitcode == -signal.SIGKILL
    with ConvertedPngs(tmp_path / "r.sqlite") as made:
        kept = [png for png in pngs if made.reusable(png, "k") is not None]
    assert kept == pngs[:64]  # the first transaction (64 rows) was committed; the rest re-convert


def test_a_file_that_is_not_a_database_is_replaced_by_an_empty_one(tmp_path):
    png = tmp_path / "a.png"
    data = _png(png)
    (tmp_path / "r.sqlite").write_bytes(b"SQLite format 3\x00" + b"\xff" * 200)  # a torn header
    with ConvertedPngs(tmp_path / "r.sqlite") as made:
        assert made.reusable(png, "k") is None
        made.remember(png, "k", RECORD, data, None)
    with ConvertedPngs(tmp_path / "r.sqlite") as made:
        assert made.reusable(png, "k") == (RECORD, None)
