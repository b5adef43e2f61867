"""`mmbu eval models`: the registry as a table and as JSON, one entry in full, and "did you mean" for a typo —
there and wherever `--model` is taken."""
from __future__ import annotations

import json

from click.testing import CliRunner

from mmbu.benchmark_eval.models.cli import models
from mmbu.benchmark_eval.models.registry import default_registry
from mmbu.benchmark_eval.runner.cli import run


def test_every_entry_is_listed_with_its_names_convention_resize_and_source():
    rows = json.loads(CliRunner().invoke(models, ["--json"]).output)
    registry = default_registry()
    assert [row["id"] for row in rows] == [entry.name for entry in registry.models]
    qwen = next(row for row in rows if row["id"] == "Qwen/Qwen2.5-VL-7B-Instruct")
    assert "Qwen2.5-VL-7B" in qwen["aliases"] and qwen["box_convention"] == "pixel xyxy"
    assert qwen["resize"].startswith("qwen25_smart_resize(") and qwen["source"]
    gemini_like = [row for row in rows if row["box_convention"].endswith("yxyx")]
    assert all(row["source"] for row in gemini_like)


def test_the_table_keeps_every_identifier_whole_in_a_file():
    output = CliRunner().invoke(models, []).output
    for entry in default_registry().models:
        assert entry.name in output  # folded onto more lines if need be, never cut with an ellipsis
    assert "…" not in output


def test_one_entry_in_full_and_a_typo_gets_the_closest_names():
    shown = CliRunner().invoke(models, ["Qwen2.5-VL-7B"])
    assert shown.exit_code == 0 and json.loads(shown.output)["box_format"]["scale"] == "pixel"
    typo = CliRunner().invoke(models, ["qwen2.5-vl-7b-instrut"])
    assert typo.exit_code == 2 and "did you mean 'Qwen/Qwen2.5-VL-7B-Instruct'?" in typo.output


def test_eval_run_suggests_the_registered_name(tmp_path):
    result = CliRunner().invoke(run, ["--release", str(tmp_path), "--model", "Qwen3-VL-8b-Instrct", "--out",
                                      str(tmp_path / "runs"), "--base-url", "http://127.0.0.1:9/v1"])
    assert result.exit_code == 2 and "did you mean 'Qwen/Qwen3-VL-8B-Instruct'?" in result.output
    assert "--box-format" in result.output  # what a model outside the registry needs instead
