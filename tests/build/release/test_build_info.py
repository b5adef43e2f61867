"""build_info.json's `created` follows SOURCE_DATE_EPOCH (reproducible-builds.org) when it is set, so two builds of
the same inputs in the same data folder write the same bytes; a value that is not a date stops `mmbu build` before it
asks any host."""
from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from mmbu.build.release.build_info import collect_build_info, created_at
from mmbu.cli import cli

REPO = Path(__file__).resolve().parents[3]


def test_created_is_the_source_date_epoch_when_set(monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1767225600")
    assert created_at() == "2026-01-01T00:00:00+00:00"
    assert collect_build_info(seed=0, taxonomy_hash="t")["created"] == "2026-01-01T00:00:00+00:00"
    monkeypatch.delenv("SOURCE_DATE_EPOCH")
    assert created_at() != "2026-01-01T00:00:00+00:00" and created_at().endswith("+00:00")


def test_a_source_date_epoch_that_is_not_a_date_is_one_sentence_and_exit_2(monkeypatch, tmp_path):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "yesterday")
    with pytest.raises(ValueError, match="SOURCE_DATE_EPOCH='yesterday' is not a whole number of seconds"):
        created_at()
    data = tmp_path / "data"
    result = CliRunner().invoke(cli, ["build", "--manifests", str(REPO / "manifests" / "demo"), "--mirror",
                                      str(REPO / "manifests" / "mirror"), "--data", str(data)])
    assert result.exit_code == 2, result.output
    assert "SOURCE_DATE_EPOCH='yesterday' is not a whole number of seconds" in result.output
    assert "Traceback" not in result.output and not (data / "raw").exists()  # stopped before any fetch
