"""The budget every reader obeys (`mmbu.core.budget`): defaults as data, raised or lowered by the environment,
lowered (never raised) per dataset, and one sentence naming the item, its declared size and the setting."""
from __future__ import annotations

from dataclasses import fields

import pytest
from PIL import Image

from mmbu.core import budget
from mmbu.curation.manifest.model import BudgetSpec


def test_the_pixel_default_is_pillows_own_guard():
    assert budget.Budget().max_pixels == Image.MAX_IMAGE_PIXELS == budget.PILLOW_MAX_IMAGE_PIXELS


def test_the_environment_sets_each_limit_and_a_bad_value_is_named():
    assert budget.from_environment({"MMBU_MAX_PIXELS": "1_000", "MMBU_MAX_SLICES": " 7 "}) == \
        budget.Budget(max_pixels=1000, max_slices=7)
    for bad in ("0", "-3", "1e9", "many"):
        with pytest.raises(ValueError, match=f"MMBU_MAX_BYTES='{bad}' is not a positive whole number"):
            budget.from_environment({"MMBU_MAX_BYTES": bad})


def test_a_dataset_may_only_lower_the_budget(monkeypatch):
    monkeypatch.setenv("MMBU_MAX_INSTANCES", "50")
    with budget.limited({"max_instances": 10, "max_pixels": None}) as inside:
        assert inside.max_instances == 10 and budget.current().max_instances == 10
        with budget.limited({"max_instances": 1000}):
            assert budget.current().max_instances == 10  # raising within a dataset is ignored
    assert budget.current().max_instances == 50


def test_the_manifest_field_holds_every_limit_and_refuses_a_raise():
    assert set(BudgetSpec.model_fields) == {item.name for item in fields(budget.Budget)}
    assert BudgetSpec(max_bytes=1024).limits() == {"max_bytes": 1024}
    with pytest.raises(ValueError, match="max_slices 200,000 is above the toolkit's 100,000"):
        BudgetSpec(max_slices=200_000)


def test_one_sentence_names_the_item_the_declared_size_and_the_setting():
    with pytest.raises(budget.OverBudget) as error:
        budget.check_plane("scan.png", 13000, 13000, channels=4)
    assert str(error.value) == ("scan.png declares an image of 13,000 × 13,000 pixels (169,000,000), more than the "
                                "89,478,485 pixels one plane may have (MMBU_MAX_PIXELS); it is refused before it is "
                                "read")
    with budget.limited({"max_bytes": 1000}), pytest.raises(budget.OverBudget, match=r"1\.0 KiB .*MMBU_MAX_BYTES"):
        budget.check_plane("scan.png", 32, 32, channels=1, sample_bytes=1)
    assert budget.planes_within(300, 16) == 16
    with budget.limited({"max_bytes": 1000}):
        assert budget.planes_within(300, 16) == 3 and budget.planes_within(5000, 16) == 1


def test_a_json_file_is_bounded_before_it_is_parsed(tmp_path):
    path = tmp_path / "ann.json"
    path.write_bytes(b'{"a": [1, 2, 3], "b": {"c": "x,y"}}')  # 7 values; commas inside strings count too
    with budget.limited({"max_json_values": 8}):
        assert budget.read_json_bytes(path) == path.read_bytes()
    with budget.limited({"max_json_values": 6}), pytest.raises(budget.OverBudget, match="up to 8 JSON values"):
        budget.read_json_bytes(path)
