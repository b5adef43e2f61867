"""`mmbu eval run` end to end against the loopback OpenAI server and a release written by pyarrow."""
from __future__ import annotations

import hashlib
import io
import json
import re
import signal
import subprocess
from collections import Counter

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from PIL import Image

from mmbu.benchmark_eval.models import BoxFormat, from_model_convention
from mmbu.benchmark_eval.records import latest_by_key, read_records
from mmbu.benchmark_eval.runner.cli import run
from mmbu.benchmark_eval.tasks import PROMPT_VERSION, ROI_COLOUR
from mmbu.core.boxes import iou
from support.eval_release import SCHEMA_FIELDS, make_rows, png, write_release
from support.eval_subprocess import eval_run_command, wait_for_records
from support.openai_server import OpenAIServer

FAMILIES = {"Qwen/Qwen2.5-VL-7B-Instruct": "qwen25", "Qwen/Qwen3-VL-8B-Instruct": "qwen3",
            "llava-hf/llava-1.5-7b-hf": "llava", "my-lab/custom-vlm": "internvl", "my-lab/refuser": "refuser"}
FOUR_NUMBERS = re.compile(r"\[\s*" + r"\s*,\s*".join([r"(-?\d+(?:\.\d+)?)"] * 4) + r"\s*\]")
FAST = ["--retry-backoff", "0.01", "--timeout", "5"]


@pytest.fixture
def server():
    with OpenAIServer(families=FAMILIES) as running:
        yield running


@pytest.fixture(scope="module")
def release_dir(tmp_path_factory):
    return write_release(tmp_path_factory.mktemp("release"), count=3)


def invoke(*args: str):
    return CliRunner().invoke(run, list(args), catch_exceptions=False)


def records_of(runs, slug):
    return read_records(runs / slug / "predictions.jsonl")


@pytest.mark.parametrize("model, slug", [
    ("Qwen/Qwen2.5-VL-7B-Instruct", "Qwen__Qwen2.5-VL-7B-Instruct"),   # pixels of the smart-resized image
    ("Qwen3-VL-8B", "Qwen__Qwen3-VL-8B-Instruct"),                      # 0-1000
    ("LLaVA-v1.5-7B", "llava-hf__llava-1.5-7b-hf"),                     # 0-1 of a padded square
])
def test_end_to_end_boxes_map_back_to_the_gold_box(server, release_dir, tmp_path, model, slug):
    result = invoke("--release", str(release_dir), "--model", model, "--base-url", server.url, "--out", str(tmp_path), *FAST)
    assert result.exit_code == 0, result.output
    records = records_of(tmp_path, slug)
    assert len(records) == 4 * 2 * 3 * 3 and all(r.status == "ok" and r.output for r in records)
    assert {r.prompt_version for r in records} == {PROMPT_VERSION}
    gold = {row["sample_id"]: row for row in make_rows("object_detection", 3, (320, 240), 0)}
    for record in records:
        if record.task != "object_detection":
            continue
        row = gold[record.sample_id]
        fmt = BoxFormat.model_validate(record.box_format)
        if record.form == "open":
            numbers = [float(n) for n in FOUR_NUMBERS.search(record.output).groups()]
            box = from_model_convention(numbers, fmt, record.image_size, record.content_size, record.sent_size,
                                        record.content_offset or (0, 0))
            assert iou(box, row["boxes"][0]) > 0.9, (record.output, box, row["boxes"][0])
        else:
            letter = re.search(r"\b([A-E])\b", record.output).group(1)
            assert row["options"]["ABCDE".index(letter)] == row["answer"]
    # the ROI reached the model: green outlines on grounded images only
    for call in server.calls:
        green = np.all(np.asarray(call.image().convert("RGB")) == ROI_COLOUR, axis=-1).sum()
        assert (green > 0) == ("outlined in green" in call.prompt or "green box" in call.prompt)
    manifest = json.loads((tmp_path / slug / "run.json").read_text())
    assert manifest["release"] == str(release_dir.resolve()) and manifest["prompt_version"] == PROMPT_VERSION
    assert manifest["registry_entry"]["box_format"] == records[0].box_format
    completeness = json.loads((tmp_path / slug / "completeness.json").read_text())
    assert len(completeness["configs"]) == 24 and all(c["ok"] == c["expected"] == 3 for c in completeness["configs"])


def test_faults_are_recorded_with_reasons_and_retried_on_rerun(server, tmp_path):
    release = write_release(tmp_path / "release", count=2)
    server.inject("timeout", count=100, delay_s=1.0, match='human blood smear, where is the "mitochondrion"')
    server.inject("empty", count=1, match="What is shown?\n\nAnswer with a short phrase")
    server.inject("refusal", count=1, match="What is shown?\n\nOptions")
    server.inject("429", count=3, retry_after=0.05)
    server.inject("500", count=2)
    args = ["--release", str(release), "--model", "Qwen/Qwen3-VL-8B-Instruct", "--base-url", server.url,
            "--out", str(tmp_path / "runs"), "--retry-backoff", "0.01", "--timeout", "0.3", "--max-attempts", "6"]
    first = invoke(*args)
    assert first.exit_code == 1, first.output
    records = records_of(tmp_path / "runs", "Qwen__Qwen3-VL-8B-Instruct")
    assert len(records) == 48
    errors = Counter(r.error_reason for r in records if r.status == "error")
    assert errors == {"timeout": 2, "empty_answer": 1, "refused": 1}
    assert all(r.output is None for r in records if r.status == "error")
    assert max(r.attempts for r in records if r.status == "ok") >= 2          # 429/500 were retried
    assert server.stats.statuses[429] == 3 and server.stats.statuses[500] == 2
    refused = next(r for r in records if r.error_reason == "refused")
    assert "can't help" in refused.error
    table = json.loads((tmp_path / "runs" / "Qwen__Qwen3-VL-8B-Instruct" / "completeness.json").read_text())["configs"]
    assert sum(c["error"] for c in table) == 4 and sum(c["ok"] for c in table) == 44

    server._faults.clear()
    asked_before = len(server.calls)
    second = invoke(*args)
    assert second.exit_code == 0, second.output
    assert len(server.calls) - asked_before == 4                              # only the errors were asked again
    records = records_of(tmp_path / "runs", "Qwen__Qwen3-VL-8B-Instruct")
    assert len(records) == 52
    assert all(r.status == "ok" for r in latest_by_key(records).values())
    assert max(Counter(r.key for r in records if r.status == "ok").values()) == 1


def test_an_image_too_large_for_the_model_is_an_error_record(server, tmp_path):
    rows = make_rows("ungrounded_classification", 2, (320, 240), 0)
    rows[1]["image"] = {"bytes": png(Image.new("RGB", (3000, 10), (40, 40, 40))), "path": None}
    folder = tmp_path / "release" / "data" / "ungrounded_classification"
    folder.mkdir(parents=True)
    schema = pa.schema(SCHEMA_FIELDS)
    pq.write_table(pa.Table.from_pylist([{n: r[n] for n, _ in SCHEMA_FIELDS} for r in rows], schema=schema),
                   folder / "train-00000-of-00001.parquet")
    result = invoke("--release", str(tmp_path / "release"), "--model", "Qwen2.5-VL-7B", "--base-url", server.url,
                    "--out", str(tmp_path / "runs"), *FAST)
    assert result.exit_code == 1
    records = records_of(tmp_path / "runs", "Qwen__Qwen2.5-VL-7B-Instruct")
    bad = [r for r in records if r.sample_id == rows[1]["sample_id"]]
    assert len(bad) == 6 and {r.error_reason for r in bad} == {"image_too_large"}
    assert "aspect ratio" in bad[0].error and bad[0].image_size == (3000, 10)
    assert all(r.status == "ok" for r in records if r.sample_id == rows[0]["sample_id"])


def test_missing_column_is_bad_input_naming_file_and_column(server, tmp_path):
    release = write_release(tmp_path / "release", tasks=("object_detection",), count=1, drop_column="target")
    result = invoke("--release", str(release), "--model", "Qwen3-VL-8B", "--base-url", server.url, "--out",
                    str(tmp_path / "runs"))
    assert result.exit_code == 2
    assert re.search(r"train-00000-of-00001\.parquet: column 'target' is missing", result.output)
    assert "Traceback" not in result.output


def test_unknown_model_needs_a_box_format(server, release_dir, tmp_path):
    args = ["--release", str(release_dir), "--model", "my-lab/custom-vlm", "--base-url", server.url,
            "--out", str(tmp_path), "--tasks", "object_detection", "--forms", "open", "--limit", "1", *FAST]
    refused = invoke(*args)
    assert refused.exit_code == 2 and "--box-format pixel|norm1000|norm1" in refused.output
    result = invoke(*args, "--box-format", "norm1000")
    assert result.exit_code == 0, result.output
    records = records_of(tmp_path, "my-lab__custom-vlm")
    assert len(records) == 3 and records[0].box_format["scale"] == "norm1000"
    assert server.calls[-1].body["model"] == "my-lab/custom-vlm"


def test_bad_usage_exits_2(server, release_dir, tmp_path):
    base = ["--release", str(release_dir), "--model", "Qwen3-VL-8B", "--out", str(tmp_path)]
    assert invoke(*base).exit_code == 2                                        # no --base-url
    assert "unknown form 'half'" in invoke(*base, "--base-url", server.url, "--forms", "half").output
    result = invoke(*base, "--base-url", server.url, "--api-key-env", "NOT_SET_ANYWHERE")
    assert result.exit_code == 2 and "NOT_SET_ANYWHERE is not set" in result.output


def test_api_key_is_sent_but_never_written(server, release_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("LAB_KEY", "sk-very-secret-value")
    result = invoke("--release", str(release_dir), "--model", "Qwen3-VL-8B", "--base-url", server.url,
                    "--api-key-env", "LAB_KEY", "--out", str(tmp_path), "--limit", "1", "--tasks",
                    "ungrounded_classification", *FAST)
    assert result.exit_code == 0
    assert server.calls[0].headers["authorization"] == "Bearer sk-very-secret-value"
    for path in (tmp_path / "Qwen__Qwen3-VL-8B-Instruct").iterdir():
        assert "sk-very-secret" not in path.read_text()
    assert "sk-very-secret" not in result.output


def test_truncated_run_file_is_repaired_and_the_run_resumes(server, release_dir, tmp_path):
    args = ["--release", str(release_dir), "--model", "Qwen3-VL-8B", "--base-url", server.url, "--out", str(tmp_path),
            "--tasks", "ungrounded_classification", "--limit", "2", *FAST]
    assert invoke(*args).exit_code == 0
    predictions = tmp_path / "Qwen__Qwen3-VL-8B-Instruct" / "predictions.jsonl"
    lines = predictions.read_bytes().splitlines(keepends=True)
    predictions.write_bytes(b"".join(lines[:-1]) + lines[-1][:57])            # killed mid-write
    result = invoke(*args)
    assert result.exit_code == 0
    assert "removed a truncated last line" in result.output
    records = read_records(predictions)
    assert len(records) == 12 and len(latest_by_key(records)) == 12


def test_kill_and_resume_in_a_subprocess(tmp_path):
    release = write_release(tmp_path / "release", count=6)
    runs = tmp_path / "runs"
    predictions = runs / "Qwen__Qwen3-VL-8B-Instruct" / "predictions.jsonl"
    with OpenAIServer(latency_s=0.05) as server:
        command = eval_run_command(release, server.url, runs, "--concurrency", "4", *FAST)
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        wait_for_records(predictions, 30)
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=10)
        written_before = predictions.read_bytes().count(b"\n")
        assert 30 <= written_before < 144
        finished = subprocess.run(command, capture_output=True, timeout=120)
        assert finished.returncode == 0, finished.stderr.decode()[-2000:]
    records = read_records(predictions)
    keys = Counter(r.key for r in records)
    assert len(keys) == 144 and max(keys.values()) == 1                      # no duplicates, nothing missing
    table = json.loads((predictions.parent / "completeness.json").read_text())["configs"]
    assert all(c["ok"] == c["expected"] == 6 for c in table)


def test_command_line_in_the_manifest_has_no_secrets():
    from mmbu.core.secrets import redact_argv

    argv = ["mmbu", "eval", "run", "--api-key", "sk-1", "--token=abc", "--api-key-env", "LAB_KEY",
            "--base-url", "https://user:pw@host/v1"]
    assert redact_argv(argv) == ["mmbu", "eval", "run", "--api-key", "<redacted>", "--token=<redacted>",
                                 "--api-key-env", "LAB_KEY", "--base-url", "https://<redacted>@host/v1"]


def test_batch_backends_get_whole_batches(server, release_dir, tmp_path):
    """The runner's path for in-process engines (vLLM, transformers), driven through a batch backend
    that answers each batch over real HTTP from the loopback server."""
    import asyncio

    from mmbu.benchmark_eval.backends import OpenAICompatBackend, OpenAICompatClient
    from mmbu.benchmark_eval.backends.base import BatchBackend
    from mmbu.benchmark_eval.models import default_registry
    from mmbu.benchmark_eval.runner import RunConfig, Runner

    class LoopbackBatch(BatchBackend):
        name = "loopback-batch"

        def __init__(self, http: OpenAICompatBackend) -> None:
            self.http, self.sizes = http, []

        async def generate_batch(self, requests):
            self.sizes.append(len(requests))
            return await asyncio.gather(*(self.http.generate(r) for r in requests))

    entry = default_registry().get("Qwen3-VL-8B")
    config = RunConfig(release_dir=release_dir, runs_dir=tmp_path, entry=entry, tasks=("ungrounded_classification",
                       "object_detection"), forms=("closed", "open"), templates=("no_context", "modality"),
                       batch_size=5)

    async def go():
        backend = LoopbackBatch(OpenAICompatBackend(OpenAICompatClient(server.url, entry.served_name)))
        try:
            return await Runner(config, backend).run(), backend.sizes
        finally:
            await backend.http.aclose()

    outcome, sizes = asyncio.run(go())
    assert outcome.progress.ok == sum(sizes) == 2 * 3 * 4 and len(sizes) >= 3 and min(sizes) >= 1
    records = read_records(config.predictions)
    assert len(records) == 24 and {r.backend for r in records} == {"loopback-batch"}


def test_two_runs_never_write_the_same_run_directory(server, release_dir, tmp_path):
    from mmbu.benchmark_eval.runner.core import run_lock

    (tmp_path / "Qwen__Qwen3-VL-8B-Instruct").mkdir()
    with run_lock(tmp_path / "Qwen__Qwen3-VL-8B-Instruct"):
        result = invoke("--release", str(release_dir), "--model", "Qwen3-VL-8B", "--base-url", server.url,
                        "--out", str(tmp_path), "--limit", "1", *FAST)
    assert result.exit_code == 2 and "another `mmbu eval run` is writing here" in result.output


def test_a_refusal_in_plain_text_is_an_answer_but_an_api_refusal_is_an_error(server, release_dir, tmp_path):
    server.inject("refusal", count=1, match="What is shown?\n\nOptions")
    result = invoke("--release", str(release_dir), "--model", "my-lab/refuser", "--box-format", "pixel",
                    "--base-url", server.url, "--out", str(tmp_path), "--tasks", "ungrounded_classification",
                    "--limit", "1", *FAST)
    assert result.exit_code == 1
    records = records_of(tmp_path, "my-lab__refuser")
    texts = [r for r in records if r.status == "ok"]
    assert len(texts) == 5 and all(r.output.startswith("I'm sorry, but I can't help") for r in texts)
    (api,) = [r for r in records if r.status == "error"]
    assert api.error_reason == "refused" and api.output is None


def test_a_changed_request_is_asked_again_on_resume(server, release_dir, tmp_path):
    args = ["--release", str(release_dir), "--model", "Qwen3-VL-8B", "--base-url", server.url, "--out", str(tmp_path),
            "--tasks", "ungrounded_classification", "--limit", "1", *FAST]
    assert invoke(*args).exit_code == 0
    assert invoke(*args).exit_code == 0
    assert len(server.calls) == 6                                  # the second run asked nothing
    assert invoke(*args, "--max-tokens", "64").exit_code == 0      # other generation parameters: a new request
    assert len(server.calls) == 12 and server.calls[-1].body["max_tokens"] == 64
    records = records_of(tmp_path, "Qwen__Qwen3-VL-8B-Instruct")
    assert len(records) == 12 and len({r.request_hash for r in records}) == 12
    table = json.loads((tmp_path / "Qwen__Qwen3-VL-8B-Instruct" / "completeness.json").read_text())["configs"]
    assert all(c["ok"] == c["expected"] == 1 for c in table)


def test_a_backend_bug_stops_the_run_with_its_exception_and_keeps_earlier_answers(server, tmp_path):
    """A non-BackendError exception is a bug: the run raises it (never hangs with producers waiting
    for askers) and the answers recorded before it are on disk."""
    import asyncio

    from mmbu.benchmark_eval.backends import OpenAICompatBackend, OpenAICompatClient
    from mmbu.benchmark_eval.models import default_registry
    from mmbu.benchmark_eval.runner import RunConfig, Runner

    class BuggyAfter(OpenAICompatBackend):
        calls = 0

        async def generate(self, request):
            BuggyAfter.calls += 1
            if BuggyAfter.calls > 4:
                raise RuntimeError("backend bug")
            return await super().generate(request)

    release = write_release(tmp_path / "release", tasks=("ungrounded_classification",), count=12)
    entry = default_registry().get("Qwen3-VL-8B")
    config = RunConfig(release_dir=release, runs_dir=tmp_path / "runs", entry=entry,
                       tasks=("ungrounded_classification",), forms=("closed", "open"),
                       templates=("no_context", "modality", "full_context"), concurrency=2)

    async def go():
        backend = BuggyAfter(OpenAICompatClient(server.url, entry.served_name), entry.chat)
        try:
            return await asyncio.wait_for(Runner(config, backend).run(), 30)
        finally:
            await backend.aclose()

    with pytest.raises(RuntimeError, match="backend bug"):
        asyncio.run(go())
    records = read_records(config.predictions)
    assert 1 <= len(records) <= 4 and {r.status for r in records} == {"ok"}


def test_rows_are_read_ahead_in_chunks_bounded_by_count_and_by_image_bytes():
    from mmbu.benchmark_eval.release import SampleImages
    from mmbu.benchmark_eval.runner.core import _take

    rows = iter([SampleImages(f"s{i}", b"x%d" % i * 500, b"m" * 500 if i % 2 else None) for i in range(10)])
    assert [r.images.sample_id for r in _take(rows, 4, 1 << 20)] == ["s0", "s1", "s2", "s3"]
    chunk = _take(rows, 4, 2500)                                                # 1000 + 1500 bytes reach the cap
    assert [r.images.sample_id for r in chunk] == ["s4", "s5"]
    # hashed in the reader thread, as the request hash has always taken them: sha256 of the release's bytes
    assert [r.image_sha256 for r in chunk] == [hashlib.sha256(b"x4" * 500).hexdigest(), hashlib.sha256(b"x5" * 500).hexdigest()]
    assert [r.mask_sha256 for r in chunk] == [None, hashlib.sha256(b"m" * 500).hexdigest()]
    assert [r.images.sample_id for r in _take(rows, 4, 10)] == ["s6"]          # always at least one row
    assert [r.images.sample_id for r in _take(rows, 9, 1 << 20)] == ["s7", "s8", "s9"]
    assert _take(rows, 4, 1 << 20) == []


def _replace_bytes(release, task, sample_id, column, data):
    path = next((release / "data" / task).glob("*.parquet"))
    table = pq.read_table(path)
    rows = table.to_pylist()
    for row in rows:
        if row["sample_id"] == sample_id:
            row[column] = {"bytes": data, "path": None}
    pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), path)


def test_a_changed_image_or_mask_is_asked_again_on_resume(server, tmp_path):
    """The request hash covers the image's and the mask's bytes: a release rebuilt with another image
    (or mask) for a row re-asks that row's questions on resume, and only those."""
    release = write_release(tmp_path / "release", tasks=("mask_grounded_classification",), count=3)
    args = ["--release", str(release), "--model", "Qwen2.5-VL-7B", "--base-url", server.url,
            "--out", str(tmp_path / "runs"), *FAST]
    assert invoke(*args).exit_code == 0 and len(server.calls) == 18
    rows = {row["sample_id"]: row for row in pq.read_table(next((release / "data").rglob("*.parquet"))).to_pylist()}
    first, second, third = sorted(rows)
    flipped = Image.open(io.BytesIO(rows[first]["image"]["bytes"])).transpose(Image.Transpose.FLIP_LEFT_RIGHT)
    _replace_bytes(release, "mask_grounded_classification", first, "image", png(flipped))
    mask = np.asarray(Image.open(io.BytesIO(rows[second]["mask"]["bytes"])).convert("L")).copy()
    mask[0, 0] = 255 - mask[0, 0]                                   # one pixel of the mask changed
    _replace_bytes(release, "mask_grounded_classification", second, "mask", png(Image.fromarray(mask)))
    assert invoke(*args).exit_code == 0
    assert len(server.calls) == 18 + 12
    records = records_of(tmp_path / "runs", "Qwen__Qwen2.5-VL-7B-Instruct")
    renewed = Counter(r.sample_id for r in records[18:])
    assert renewed == {first: 6, second: 6} and third not in renewed
    # the first row's new requests carry the flipped image: its pixels reached the model
    sent = [np.asarray(call.image().convert("RGB")) for call in server.calls[18:24]]
    original = [np.asarray(call.image().convert("RGB")) for call in server.calls[:18]]
    assert any(not any(np.array_equal(s, o) for o in original) for s in sent)
