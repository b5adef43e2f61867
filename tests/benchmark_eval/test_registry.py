"""The model registry and the box conventions it declares."""
from __future__ import annotations

import pytest

from mmbu.benchmark_eval.models import (BoxFormat, RegistryError, SmartResize, SquarePad, ad_hoc_entry, default_registry,
                                        from_model_convention, load_registry, model_frame_size, model_slug, smart_resize,
                                        to_model_convention)
from mmbu.benchmark_eval.runner.core import model_fingerprint

PAPER_MODELS = ["GPT-5.4-mini", "GPT-4.1-mini", "Gemma-3-4B", "MedGemma-4B", "MedGemma-1.5-4B", "InternVL3.5-8B",
                "Lingshu-7B", "Lingshu-32B", "Qwen2.5-VL-3B", "Qwen2.5-VL-7B", "Qwen2.5-VL-32B", "Qwen3-VL-4B",
                "Qwen3-VL-8B", "Qwen3-VL-32B", "LLaVA-v1.5-7B", "LLaVA-Med-7B", "OctoMed-7B"]


def test_the_papers_17_models_are_registered():
    registry = default_registry()
    assert sorted(m.display_name for m in registry.models) == sorted(PAPER_MODELS)


@pytest.mark.parametrize("name, scale, order, smart", [
    ("Qwen/Qwen2.5-VL-7B-Instruct", "pixel", "xyxy", True),
    ("lingshu-medical-mllm/Lingshu-7B", "pixel", "xyxy", True),
    ("OctoMed-7B", "pixel", "xyxy", True),
    ("qwen/qwen3-vl-8b-instruct", "norm1000", "xyxy", False),   # lookup is case-insensitive
    ("InternVL3.5-8B", "norm1000", "xyxy", False),
    ("LLaVA-v1.5-7B", "norm1", "xyxy", False),
    ("gpt-4.1-mini", "norm1000", "xyxy", False),
])
def test_declared_conventions(name, scale, order, smart):
    entry = default_registry().get(name)
    assert entry.box_format.scale == scale and entry.box_format.order == order
    assert isinstance(entry.box_format.resize, SmartResize) is smart


def test_quirks_and_served_names():
    registry = default_registry()
    gpt5 = registry.get("GPT-5.4-mini")
    assert gpt5.served_name == "gpt-5.4-mini" and not gpt5.chat.temperature
    assert gpt5.chat.max_tokens_field == "max_completion_tokens" and gpt5.default_base_url.endswith("/v1")
    assert registry.get("OctoMed-7B").chat.thinking_tags == ("<think>", "</think>")
    for llava in ("LLaVA-v1.5-7B", "LLaVA-Med-7B"):  # centred, in the CLIP mean colour, as both were trained
        assert registry.get(llava).image.square_pad == SquarePad(position="center", fill=(122, 116, 104))
    assert model_slug("Qwen/Qwen2.5-VL-7B-Instruct") == "Qwen__Qwen2.5-VL-7B-Instruct"


@pytest.mark.parametrize("name", ["..", ".", "", ".hidden", "../../etc", "a/../..", "ｍｏｄｅｌ", "mod\x00el", "C:\\x"])
def test_a_model_name_becomes_one_plain_folder_inside_the_runs_folder(tmp_path, name):
    slug = model_slug(name)
    assert slug and not slug.startswith(".") and "/" not in slug and slug.isascii()
    assert (tmp_path / slug).resolve().parent == tmp_path.resolve()


def test_unknown_model_and_invalid_registry(tmp_path):
    with pytest.raises(RegistryError, match="'my-vlm' is not in the registry"):
        default_registry().get("my-vlm")
    bad = tmp_path / "registry.yaml"
    bad.write_text("version: 1\nmodels:\n  - name: x\n    display_name: X\n    hf_id: a/x\n    family: f\n"
                   "    box_format: {scale: pixels}\n")
    with pytest.raises(RegistryError, match=r"registry.yaml: invalid model registry at models.0.box_format.scale"):
        load_registry(bad)
    duplicate = tmp_path / "dup.yaml"
    duplicate.write_text("version: 1\nmodels:\n" + "".join(
        f"  - {{name: m{i}, display_name: Same, hf_id: a/m{i}, family: f, box_format: {{scale: norm1}}, "
        f"source: {{box_format: s, image: s, reasoning: s}}}}\n" for i in range(2)))
    with pytest.raises(RegistryError, match="'Same' names both m0 and m1"):
        load_registry(duplicate)


def test_family_facts_are_stated_once_per_family_and_reach_every_entry(tmp_path):
    """Backends read `entry.family_facts`, never a family's name: a family of any name may ship remote code."""
    registry = default_registry()
    assert {e.family for e in registry.models} <= set(registry.families)  # every family is declared
    assert registry.get("InternVL3.5-8B").family_facts.trust_remote_code
    assert registry.get("Qwen3-VL-8B").family_facts.processor_max_pixels
    assert not any(registry.get(m).family_facts.trust_remote_code for m in ("Qwen2.5-VL-7B", "LLaVA-v1.5-7B"))
    entry = "{{name: m, display_name: M, hf_id: a/m, family: {family}, box_format: {{scale: norm1}}, " \
            "source: {{box_format: s, image: s, reasoning: s}}}}"
    custom = tmp_path / "custom.yaml"
    custom.write_text("version: 1\nfamilies:\n  newvl: {trust_remote_code: true}\nmodels:\n  - "
                      + entry.format(family="newvl") + "\n")
    assert load_registry(custom).get("m").family_facts.trust_remote_code
    misspelt = tmp_path / "misspelt.yaml"
    misspelt.write_text("version: 1\nfamilies:\n  newvl: {}\nmodels:\n  - " + entry.format(family="newvI") + "\n")
    with pytest.raises(RegistryError, match="model 'm' has family 'newvI', which is not under families: \\(newvl\\)"):
        load_registry(misspelt)


@pytest.mark.parametrize("height, width, expected", [
    (240, 320, (252, 308)),        # rounded to the nearest multiples of 28
    (28, 28, (56, 56)),            # below min_pixels: scaled up
    (2000, 3000, (812, 1204)),     # above max_pixels: scaled down, floored
    (1000, 1000, (980, 980)),      # 1008x1008 would exceed max_pixels: floored to 35*28
])
def test_smart_resize(height, width, expected):
    h, w = smart_resize(height, width, 28, 3136, 1003520)
    assert h % 28 == 0 and w % 28 == 0 and 3136 <= h * w <= 1003520
    assert (h, w) == expected


def test_smart_resize_refuses_extreme_aspect_ratios():
    with pytest.raises(ValueError, match="aspect ratio"):
        smart_resize(10, 3000)


def test_box_format_string_form_and_validation():
    fmt = BoxFormat(scale="pixel", resize="qwen25_smart_resize(3136,1003520,28)")
    assert fmt.resize == SmartResize(min_pixels=3136, max_pixels=1003520, factor=28)
    with pytest.raises(ValueError, match="only for pixel-scale"):
        BoxFormat(scale="norm1000", resize="qwen25_smart_resize")


@pytest.mark.parametrize("fmt, image, content, sent, expected", [
    (BoxFormat(scale="pixel"), (640, 480), (320, 240), (320, 240), [50, 25, 100, 75]),
    (BoxFormat(scale="norm1000"), (640, 480), (320, 240), (320, 240), [156, 104, 313, 313]),
    (BoxFormat(scale="norm1000", order="yxyx"), (640, 480), (640, 480), (640, 480), [104, 156, 313, 313]),
    (BoxFormat(scale="norm1"), (640, 480), (320, 240), (320, 320), [0.156, 0.078, 0.312, 0.234]),  # padded square
    (BoxFormat(scale="pixel", resize="qwen25_smart_resize(3136,1003520,28)"), (640, 480), (644, 476), (644, 476),
     [101, 50, 201, 149]),
])
def test_box_round_trip_between_original_pixels_and_model_convention(fmt, image, content, sent, expected):
    box = (100.0, 50.0, 200.0, 150.0)
    values = to_model_convention(box, fmt, image, content, sent)
    assert values == pytest.approx(expected, abs=1)
    back = from_model_convention(values, fmt, image, content, sent)
    assert back == pytest.approx(box, abs=2.5)


def test_model_frame_of_smart_resize_is_identity_for_an_already_resized_image():
    fmt = BoxFormat(scale="pixel", resize="qwen25_smart_resize(3136,1003520,28)")
    assert model_frame_size(fmt, (308, 252)) == (308, 252)
    assert model_frame_size(fmt, (320, 240)) == (308, 252)


def test_medgemma_15_answers_y_first_on_a_square_and_thinks_in_unused_tokens():
    entry = default_registry().get("MedGemma-1.5-4B")
    assert (entry.box_format.scale, entry.box_format.order) == ("norm1000", "yxyx")
    assert entry.image.square_pad == SquarePad(position="center", fill=(0, 0, 0))
    assert entry.chat.thinking_tags == ("<unused94>", "<unused95>")
    # {"box_2d": [y0, x0, y1, x1]} on a 400x200 image sent as a 400x400 square with the image at y 100..300
    box = from_model_convention([250, 250, 750, 750], entry.box_format, (400, 200), (400, 200), (400, 400), (0, 100))
    assert box == (100.0, 0.0, 300.0, 200.0)


def test_every_entry_cites_where_its_conventions_come_from():
    for entry in default_registry().models:
        assert entry.source.box_format.strip() and entry.source.image.strip() and entry.source.reasoning.strip(), entry.name
    assert "command line" in ad_hoc_entry("my-vlm", "norm1000").source.box_format
    assert default_registry().reasoning_tags() == (("<think>", "</think>"), ("<unused94>", "<unused95>"))


def test_a_parse_only_quirk_leaves_request_hashes_alone():
    entry = default_registry().get("Qwen3-VL-8B")
    thinking = entry.model_copy(update={"chat": entry.chat.model_copy(update={"thinking_prefilled": True})})
    assert model_fingerprint(thinking) == model_fingerprint(entry)
