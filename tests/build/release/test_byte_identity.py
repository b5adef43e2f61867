"""The streaming writer produces byte for byte what the writer before it did (golden SHA256SUMS).

`golden_sha256sums.json` holds the SHA256SUMS of releases written from the `built` fixture by the
writer as of commit 953bcb4, which materialised every record of a config before writing; the
cases cover one shard per config, many shards, and several row groups per shard. Only the exclusions.csv
line has changed since: the file gained the duplicate step's columns `duplicate_of` and `distance`.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from mmbu.build.release import rows as release_rows
from mmbu.build.release import shards as release_shards
from mmbu.build.release import verify_sha256sums, write_release
from mmbu.build.release.checksums import SUMS_NAME

GOLDEN = json.loads((Path(__file__).with_name("golden_sha256sums.json")).read_text(encoding="utf-8"))
BUILD_INFO = {"created": "2026-01-01T00:00:00+00:00", "seeds": {"questions": 1}}
CASES = {"default": {}, "small_shards": {"max_shard_bytes": 2_000},
         "small_row_groups": {"max_shard_bytes": 6_000, "max_row_group_bytes": 1_500}}


@pytest.mark.parametrize("small_batches", [False, True])
@pytest.mark.parametrize("case", sorted(CASES))
def test_release_is_byte_identical_to_the_pre_streaming_writer(built, tmp_path, monkeypatch, case, small_batches):
    if small_batches:  # rows read 4 at a time and row groups built from Arrow batches of 3 rows
        monkeypatch.setattr(release_rows, "ROWS_PER_CHUNK", 4)
        monkeypatch.setattr(release_shards, "ROWS_PER_BATCH", 3)
    out = tmp_path / case
    write_release(built["rows_by_task"], out, built["manifests"], BUILD_INFO, exclusions=built["exclusions"],
                  **CASES[case])
    assert verify_sha256sums(out) == []
    assert (out / SUMS_NAME).read_text(encoding="utf-8").splitlines() == GOLDEN[case]
