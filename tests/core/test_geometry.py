"""The conversion geometry: a chain of steps from the stored frame to the PNG that must join up."""
from __future__ import annotations

import pytest

from mmbu.core.geometry import ConversionGeometry, Transform


def test_steps_chain_from_the_stored_size_to_the_output_size():
    geometry = ConversionGeometry.kept((4096, 3072)).then("level", (1024, 768)).then("resize", (512, 384), "lanczos")
    assert [step.kind for step in geometry.transforms] == ["level", "resize"]
    assert geometry.output_size == (512, 384) and geometry.scale == (0.125, 0.125)
    assert geometry.then("resize", (512, 384)) is geometry  # a step that changes nothing is not recorded
    assert ConversionGeometry.from_json(geometry.to_json()) == geometry


def test_a_missing_step_is_refused_with_the_sizes():
    with pytest.raises(ValueError, match="starts at 1024 x 768 but the image was 4096 x 3072"):
        ConversionGeometry((4096, 3072), (512, 384), (Transform("resize", (1024, 768), (512, 384)),))
    with pytest.raises(ValueError, match="end at 4096 x 3072, not at the output size 512 x 384"):
        ConversionGeometry((4096, 3072), (512, 384))


def test_an_orient_step_swaps_the_axes_only_when_it_turns_the_image():
    assert ConversionGeometry.kept((40, 20)).then("orient", (20, 40), "ROTATE_270").oriented
    with pytest.raises(ValueError, match="ROTATE_90 turns 40 x 20 into 20 x 40"):
        Transform("orient", (40, 20), (40, 20), "ROTATE_90")
    with pytest.raises(ValueError, match="needs one of"):
        Transform("orient", (40, 20), (40, 20), "MIRROR")
    with pytest.raises(ValueError, match="no per-axis scale"):
        ConversionGeometry.kept((40, 20)).then("orient", (40, 20), "FLIP_LEFT_RIGHT").scale
