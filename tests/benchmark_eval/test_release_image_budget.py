"""A release image of 169 MP (issue 32, point 3): the eval checks its header against the budget the build's readers
obey (`mmbu.core.budget`, shared through core: the eval imports nothing of the build), so the sample costs one
`image_too_large` record per question and is never decoded (2-6 GiB per worker otherwise)."""
from __future__ import annotations

import subprocess
import sys

import pyarrow.parquet as pq
from support.eval_release import write_release
from support.openai_server import OpenAIServer
from support.peak_memory import MIB, run_measured

from mmbu.benchmark_eval.records import read_records

SLUG = "Qwen__Qwen3-VL-8B-Instruct"
RUN = """
import subprocess, sys, resource
done = subprocess.run([sys.executable, "-m", "mmbu", "eval", "run", "--release", {release!r}, "--model", "Qwen3-VL-8B",
                       "--base-url", {url!r}, "--out", {out!r}, "--tasks", "ungrounded_classification",
                       "--max-attempts", "1", "--timeout", "20"], capture_output=True, text=True)
ANSWER = {{"code": done.returncode, "stderr": done.stderr[-2000:],
          "peak_kib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}}
"""


def test_a_169_megapixel_release_image_is_refused_from_its_header(tmp_path):
    release = write_release(tmp_path / "release", tasks=("ungrounded_classification",), count=2)
    big = tmp_path / "big.png"
    subprocess.run([sys.executable, "-c", f"from PIL import Image; Image.new('RGB', (13000, 13000)).save({str(big)!r})"],
                   check=True, timeout=120)
    shard, = (release / "data" / "ungrounded_classification").glob("*.parquet")
    rows = pq.read_table(shard).to_pylist()
    rows[0]["image"] = {"bytes": big.read_bytes(), "path": "big.png"}
    pq.write_table(pq.read_table(shard).from_pylist(rows, schema=pq.read_schema(shard)), shard)

    with OpenAIServer() as server:
        answer = run_measured(RUN.format(release=str(release), url=server.url, out=str(tmp_path / "runs"))).answer
    assert answer["code"] == 1, answer["stderr"]
    records = read_records(tmp_path / "runs" / SLUG / "predictions.jsonl")
    refused = [r for r in records if r.status == "error"]
    assert {r.sample_id for r in refused} == {rows[0]["sample_id"]} and len(refused) == 2 * 3
    assert {r.error_reason for r in refused} == {"image_too_large"}
    assert "declares an image of 13,000 × 13,000 pixels (169,000,000)" in refused[0].error
    assert "MMBU_MAX_PIXELS" in refused[0].error
    assert all(r.status == "ok" for r in records if r.sample_id != rows[0]["sample_id"])
    assert answer["peak_kib"] < 600 * MIB, f"peak {answer['peak_kib'] // 1024} MiB"  # 507 MB for its RGB alone
