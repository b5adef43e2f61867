"""vLLM offline and transformers backends: what they would hand to the engines (no GPU needed),
and a real run on a GPU where vLLM/torch and CUDA are present."""
from __future__ import annotations

import asyncio
import base64
import importlib.util
import io
import os

import pytest
from PIL import Image

from mmbu.benchmark_eval.backends import BackendError, ModelRequest
from mmbu.benchmark_eval.backends.base import answer_in_halves
from mmbu.benchmark_eval.backends.transformers_local import (TransformersBackend, decode_image, generate_kwargs,
                                                             processor_messages)
from mmbu.benchmark_eval.backends.vllm_offline import VLLMOfflineBackend, conversations, engine_kwargs, sampling_kwargs
from mmbu.benchmark_eval.models import FamilyFacts, default_registry
from mmbu.benchmark_eval.tasks import prepare_image
from mmbu.core.boxes import iou
from support.eval_release import object_image, png

REGISTRY = default_registry()


def request(entry_name: str = "Qwen/Qwen2.5-VL-7B-Instruct", prompt: str = "What is shown?") -> ModelRequest:
    prepared = prepare_image(png(object_image((320, 240), (40, 40, 120, 100), 1)), REGISTRY.get(entry_name))
    return ModelRequest("s1/ungrounded_classification/open/no_context", prompt, prepared.data, prepared.mime,
                        system="Be careful.", max_tokens=64, seed=3, image_url=prepared.data_url)


def test_vllm_engine_arguments_follow_the_registry():
    qwen = engine_kwargs(REGISTRY.get("Qwen/Qwen2.5-VL-7B-Instruct"), tensor_parallel_size=2)
    assert qwen["model"] == "Qwen/Qwen2.5-VL-7B-Instruct" and qwen["tensor_parallel_size"] == 2
    assert qwen["mm_processor_kwargs"] == {"min_pixels": 3136, "max_pixels": 1003520}
    assert qwen["limit_mm_per_prompt"] == {"image": 1} and qwen["trust_remote_code"] is False
    internvl = engine_kwargs(REGISTRY.get("InternVL3.5-8B"))
    assert internvl["trust_remote_code"] is True and "mm_processor_kwargs" not in internvl
    qwen3 = engine_kwargs(REGISTRY.get("Qwen3-VL-8B"))  # not smart-resized: the processor is bounded instead
    assert qwen3["mm_processor_kwargs"] == {"max_pixels": 1003520} and qwen3["trust_remote_code"] is False
    # the facts, not the family's name: a renamed family keeps them, a family without them gets none
    renamed = REGISTRY.get("InternVL3.5-8B").model_copy(update={"family": "internvl-next"})
    assert engine_kwargs(renamed)["trust_remote_code"] is True
    plain = REGISTRY.get("Qwen3-VL-8B").model_copy(update={"family_facts": FamilyFacts()})
    assert "mm_processor_kwargs" not in engine_kwargs(plain)


def test_vllm_conversations_carry_the_image_and_fold_system_prompts_where_unsupported():
    qwen, llava = REGISTRY.get("Qwen/Qwen2.5-VL-7B-Instruct"), REGISTRY.get("LLaVA-v1.5-7B")
    sent = request()
    (with_system,) = conversations([sent], qwen)
    assert [m["role"] for m in with_system] == ["system", "user"]
    image_part, text_part = with_system[1]["content"]
    header, _, data = image_part["image_url"]["url"].partition(",")
    assert header == "data:image/png;base64"
    assert Image.open(io.BytesIO(base64.b64decode(data))).size == (308, 252)   # smart-resized before sending
    assert text_part == {"type": "text", "text": "What is shown?"}
    (folded,) = conversations([sent], llava)
    assert [m["role"] for m in folded] == ["user"] and folded[0]["content"][1]["text"].startswith("Be careful.\n\n")
    assert sampling_kwargs(sent) == {"temperature": 0.0, "max_tokens": 64, "n": 1, "seed": 3}


def test_transformers_messages_and_generation_arguments():
    entry = REGISTRY.get("google/medgemma-4b-it")
    sent = request("google/medgemma-4b-it")
    messages = processor_messages(sent, entry)
    assert messages[0] == {"role": "system", "content": [{"type": "text", "text": "Be careful."}]}
    assert messages[1]["content"] == [{"type": "image"}, {"type": "text", "text": "What is shown?"}]
    assert generate_kwargs(sent) == {"max_new_tokens": 64, "do_sample": False}
    assert decode_image(sent).size == (320, 240)   # within MedGemma's 896 max side: not resized


def test_a_failing_request_is_isolated_from_its_batch():
    calls = []

    def answer_all(items):
        calls.append(len(items))
        if "bad" in items:
            raise ValueError("The decoder prompt (length 60025) is longer than the maximum model length of 32768")
        return [f"answer to {i}" for i in items]

    items = ["a", "b", "bad", "c", "d"]
    results = answer_in_halves(items, answer_all, lambda item, exc: ("error", item, str(exc)[:20]))
    assert results[:2] == ["answer to a", "answer to b"] and results[3:] == ["answer to c", "answer to d"]
    assert results[2][:2] == ("error", "bad")
    assert calls[0] == 5 and len(calls) < 10


def test_missing_optional_engines_become_error_records_not_crashes():
    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("vLLM is installed here; the missing-extra path cannot be shown")
    backend = VLLMOfflineBackend(REGISTRY.get("Qwen/Qwen2.5-VL-3B-Instruct"))
    (answer,) = asyncio.run(backend.generate_batch([request()]))
    assert isinstance(answer, BackendError) and "pip install 'mmbu[vllm]'" in str(answer)
    with pytest.raises(ValueError, match="has no hf_id"):
        TransformersBackend(REGISTRY.get("gpt-4.1-mini"))


GPU_MODEL = os.environ.get("MMBU_GPU_TEST_MODEL", "Qwen/Qwen2.5-VL-3B-Instruct")


def _gpu_ready(engine: str) -> bool:
    """The engine, a CUDA GPU and the test model's weights (already in the local HF cache) are present."""
    if importlib.util.find_spec(engine) is None or importlib.util.find_spec("torch") is None:
        return False
    import torch
    from huggingface_hub import try_to_load_from_cache

    return torch.cuda.is_available() and isinstance(try_to_load_from_cache(GPU_MODEL, "config.json"), str)


def _detection_request(entry_name: str) -> tuple[ModelRequest, object]:
    """A synthetic image with one bright box and a detection prompt in the model's declared convention."""
    from mmbu.benchmark_eval.tasks import build_prompt

    entry = REGISTRY.get(entry_name)
    image = png(object_image((448, 336), (120, 90, 300, 230), 4))
    prepared = prepare_image(image, entry)
    row = {"sample_id": "gpu-0", "target": "bright rectangle",
           "question_no_context": 'Where is the "bright rectangle" in this image?'}
    prompt = build_prompt("object_detection", "open", "no_context", row, box_format=entry.box_format,
                          frames=prepared.frames)
    return ModelRequest("gpu-0", prompt.text, prepared.data, prepared.mime, system=prompt.system, max_tokens=128,
                        image_url=prepared.data_url), prepared.frames


@pytest.mark.gpu
@pytest.mark.skipif(not _gpu_ready("vllm"), reason="needs vLLM, a CUDA GPU and the test model in the HF cache")
def test_vllm_box_convention_self_test_on_gpu():
    """The registry's declared convention for the model, checked on a known box (IoU >= 0.5)."""
    import re

    from mmbu.benchmark_eval.models import from_model_convention

    entry = REGISTRY.get(GPU_MODEL)
    request, frames = _detection_request(GPU_MODEL)
    backend = VLLMOfflineBackend(entry, gpu_memory_utilization=0.8, max_model_len=4096)
    (answer,) = asyncio.run(backend.generate_batch([request]))
    assert not isinstance(answer, BackendError), answer
    numbers = [float(n) for n in re.findall(r"-?\d+(?:\.\d+)?", answer.text.split("Answer:")[-1])][:4]
    box = from_model_convention(numbers, entry.box_format, frames.image_size, frames.content_size, frames.sent_size,
                                frames.content_offset)
    assert iou(box, (120, 90, 300, 230)) >= 0.5, answer.text


@pytest.mark.gpu
@pytest.mark.skipif(not _gpu_ready("transformers"), reason="needs transformers, a CUDA GPU and the test model in the HF cache")
def test_transformers_answers_a_batch_on_gpu():
    backend = TransformersBackend(REGISTRY.get(GPU_MODEL))
    answers = asyncio.run(backend.generate_batch([request(GPU_MODEL, "Is there a bright rectangle? Answer yes or no.")] * 2))
    assert all(not isinstance(a, BackendError) and a.text.strip() for a in answers)


def test_the_gpu_self_test_request_states_the_declared_convention():
    request_, frames = _detection_request("Qwen/Qwen2.5-VL-3B-Instruct")
    assert frames.sent_size == (448, 336)
    assert "pixel coordinates of this image, which is 448 pixels wide and 336 pixels high" in request_.prompt
