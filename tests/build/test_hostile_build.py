"""Whole builds against hostile input and faults (issue 16): each costs its item or its dataset, never the
build, and a re-run resumes."""
from __future__ import annotations

import csv
import os

import numpy as np
from PIL import Image
from support.build_repo import config_for, make_repo

from mmbu.build.pipeline import run_build


def test_a_file_name_that_is_not_utf8_is_one_exclusion_and_the_dataset_builds(tmp_path):
    make_repo(tmp_path)
    odd = tmp_path / "src" / "cells" / "lym" / os.fsdecode(b"lym\xe9-latin1.png")
    Image.fromarray(np.full((40, 48, 3), 77, np.uint8)).save(odd)

    report = run_build(config_for(tmp_path))

    assert report.failed == [] and report.exit_code == 1  # 1: an item was excluded
    assert report.release_rows["ungrounded_classification"] == 8  # the other eight cells
    with (tmp_path / "data" / "release" / "exclusions.csv").open(encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert [(r["dataset_id"], r["item"]) for r in rows] == [("cells", "lym/lym\\xe9-latin1.png")]
    assert "not valid UTF-8" in rows[0]["reason"]
    again = run_build(config_for(tmp_path))
    assert again.failed == [] and again.release_rows == report.release_rows
