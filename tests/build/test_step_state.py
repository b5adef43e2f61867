"""`StepState` (build/cache.py): which steps are fresh, and what a rerun of an earlier step invalidates on disk."""
from __future__ import annotations

import json

from mmbu.build.cache import StepState


def test_a_step_is_fresh_for_its_inputs_while_its_outputs_exist(tmp_path):
    output = tmp_path / "samples.json"
    output.write_text("[]", encoding="utf-8")
    state = StepState(tmp_path / "state.json")
    state.record("layout", "k1", [output], {"samples": 0})
    again = StepState(tmp_path / "state.json")  # as the next build reads it
    assert again.is_fresh("layout", "k1") and not again.is_fresh("layout", "k2")
    assert again.outputs("layout") == {"samples": 0}
    output.unlink()
    assert not again.is_fresh("layout", "k1")


def test_forgetting_steps_rewrites_the_state_only_when_one_was_recorded(tmp_path):
    path = tmp_path / "state.json"
    state = StepState(path)
    state.forget_from(["convert", "rows", "hashes"])  # a first build: nothing to forget, nothing written
    assert not path.exists()
    state.record("layout", "k1", [], {})
    state.record("convert", "k2", [], {})
    written = path.stat().st_mtime_ns, path.read_text(encoding="utf-8")
    state.forget_from(["rows", "hashes"])
    assert (path.stat().st_mtime_ns, path.read_text(encoding="utf-8")) == written
    state.forget_from(["convert", "rows", "hashes"])
    assert sorted(json.loads(path.read_text(encoding="utf-8"))) == ["layout"]
    assert not StepState(path).is_fresh("convert", "k2")


def test_a_torn_state_file_makes_every_step_run_again(tmp_path):
    (tmp_path / "state.json").write_text('{"layout": {"inputs": "k1", "outp', encoding="utf-8")
    assert not StepState(tmp_path / "state.json").is_fresh("layout", "k1")
