"""Scoring throughput: one million predictions scored with 1,000-resample bootstrap CIs.

Writes a synthetic release (4 tasks, tiny shared PNGs, real contract columns) and one run
directory per model with realistic outputs (letters, ``Answer:`` lines, JSON, ``<think>`` blocks,
unparseable prose; open answers with cached judge verdicts; detection boxes in 0-1000), then times

* reading + per-record scoring (``load_outcomes``: parse, pre-check, verdict look-up, IoU matching),
* aggregation (``score_outcomes``: every configuration's F1 and CI, paired Δ CIs, breakdowns by
  sub-modality, paired win/tie/loss), with and without resampling by image,

and compares, on one configuration, our multinomial bootstrap with the plain index bootstrap
(numpy, vectorised in chunks) and with ``scipy.stats.bootstrap`` (percentile method), and the
columnar run-file reader with the record-by-record pydantic reader.

    .venv/bin/python benchmarks/eval_scoring.py [--predictions 1000000] [--models 5] [--workdir DIR]
"""
from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import platform
import resource
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from PIL import Image
from scipy import stats

from mmbu.benchmark_eval.judge.cache import Judgement, verdict_key
from mmbu.benchmark_eval.judge.precheck import final_answer_text, precheck_equivalent
from mmbu.benchmark_eval.judge.prompt import JUDGE_PROMPT_VERSION
from mmbu.benchmark_eval.records import RunRecord, read_records, read_records_frame
from mmbu.benchmark_eval.release import TASKS
from mmbu.benchmark_eval.scoring.bootstrap import bootstrap_f1, percentile_interval
from mmbu.benchmark_eval.scoring.metrics import micro_f1
from mmbu.benchmark_eval.scoring.scores import ScoreOptions, load_outcomes, score_outcomes

FORMS, TEMPLATES = ("closed", "open"), ("no_context", "modality", "full_context")
LABELS = [f"cell type {i}" for i in range(12)]
SUB_MODALITIES = ["Brightfield Microscopy", "Fluorescence Microscopy", "CT", "MRI", "X-ray", "Ultrasound",
                  "Dermoscopy", "Fundus Photography", "Endoscopy", "Electron Microscopy"]
SIZE = (320, 240)


def tiny_png() -> bytes:
    buffer = io.BytesIO()
    Image.new("L", (8, 8), 0).save(buffer, format="PNG")
    return buffer.getvalue()


def write_release(root: Path, samples: int, rng: np.random.Generator) -> dict[str, list[dict]]:
    png = {"bytes": tiny_png(), "path": None}
    gold: dict[str, list[dict]] = {}
    for task in TASKS:
        rows = []
        for index in range(samples):
            sub = SUB_MODALITIES[index % len(SUB_MODALITIES)]
            row = {"sample_id": f"{task[:4]}-{index:06d}", "dataset_id": f"ds{index % 40}", "image": png,
                   "mask": None, "target": None, "boxes": None,
                   "question_no_context": "q", "question_modality": "q", "question_full_context": "q",
                   "image_source": "synthetic", "dataset_name": f"DS {index % 40}", "domain": "d",
                   "modality": sub.split()[-1], "sub_modality": sub, "stain": None, "specimen": "human",
                   "specimen_subregion": None, "topic": "t", "original_task": "classification", "context": "c",
                   "institution": f"inst{index % 7}", "url": "https://example.org", "license": "CC-BY-4.0",
                   "answer_aliases": [], "image_sha256": hashlib.sha256(f"{task}{index // 2}".encode()).hexdigest()}
            if task == "object_detection":
                w, h = SIZE
                x1, y1 = int(rng.integers(0, w - 80)), int(rng.integers(0, h - 60))
                box = [float(x1), float(y1), float(x1 + 60), float(y1 + 45)]
                options = [f"[{int(box[0])}, {int(box[1])}, {int(box[2])}, {int(box[3])}]"]
                while len(options) < 4:
                    dx, dy = int(rng.integers(0, w - 80)), int(rng.integers(0, h - 60))
                    options.append(f"[{dx}, {dy}, {dx + 60}, {dy + 45}]")
                row.update(boxes=[box], target="cell", answer=options[0])
            else:
                answer = LABELS[index % len(LABELS)]
                options = [answer, *rng.choice([l for l in LABELS if l != answer], 3, replace=False).tolist()]
                row["answer"] = answer
                row["answer_aliases"] = [answer.upper()]
            order = rng.permutation(4).tolist()
            row["options"] = [options[i] for i in order] + ["None of the above"]
            rows.append(row)
        folder = root / "data" / task
        folder.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_pylist(rows), folder / "train-00000-of-00001.parquet")
        gold[task] = rows
    return gold


CLOSED_STYLES = ["{L}", "Answer: {L}", "The answer is ({L}).", '{{"answer": "{L}"}}', "**{L}**",
                 "<think>\nThe region looks uniform; comparing the options.\n</think>\n{L}. {T}",
                 "Looking at the image, the correct answer is **{L}**. The others differ in shape."]
OPEN_STYLES = ["{G}", "The image shows a {G}.", "It looks like {G} variant", "possibly {G}", "an unrelated structure",
               "{O}", "Answer: {O}"]


def closed_output(row: dict, rng: np.random.Generator, skill: float) -> str:
    options = row["options"]
    if rng.random() < 0.05:
        return "I cannot determine this from the image alone."
    right = "ABCDE"[options.index(row["answer"])]
    label = right if rng.random() < skill else "ABCDE"[int(rng.integers(0, len(options)))]
    style = CLOSED_STYLES[int(rng.integers(0, len(CLOSED_STYLES)))]
    return style.format(L=label, T=options["ABCDE".index(label)])


def open_output(task: str, row: dict, rng: np.random.Generator) -> str:
    if task == "object_detection":
        if rng.random() < 0.05:
            return "The cells are spread across the image."
        x1, y1, x2, y2 = (v + float(rng.normal(0, 8)) for v in row["boxes"][0])
        w, h = SIZE
        values = [round(x1 / w * 1000), round(y1 / h * 1000), round(x2 / w * 1000), round(y2 / h * 1000)]
        return f'```json\n[{{"bbox_2d": {values}, "label": "cell"}}]\n```'
    other = LABELS[int(rng.integers(0, len(LABELS)))]
    return OPEN_STYLES[int(rng.integers(0, len(OPEN_STYLES)))].format(G=row["answer"], O=other)


def write_runs(runs: Path, release: Path, gold: dict[str, list[dict]], models: int,
               rng: np.random.Generator) -> list[Path]:
    run_dirs = []
    box_format = {"scale": "norm1000", "order": "xyxy", "resize": "none"}
    for m in range(models):
        model = f"synthetic-model-{m}"
        run_dir = runs / model
        run_dir.mkdir(parents=True, exist_ok=True)
        skill = 0.3 + 0.1 * m
        judgements: dict[str, str] = {}
        first = True
        with open(run_dir / "predictions.jsonl", "w", encoding="utf-8") as out:
            for task, rows in gold.items():
                for form in FORMS:
                    for template in TEMPLATES:
                        for row in rows:
                            output = closed_output(row, rng, skill) if form == "closed" else open_output(task, row, rng)
                            record = {"sample_id": row["sample_id"], "task": task, "form": form, "template": template,
                                      "model": model, "prompt_version": "bench-v1", "status": "ok", "output": output,
                                      "error": None, "error_reason": None, "latency_s": 0.5,
                                      "request_hash": hashlib.sha256(f"{model}{task}{form}{template}{row['sample_id']}".encode()).hexdigest(),
                                      "image_size": list(SIZE), "sent_size": list(SIZE), "content_size": list(SIZE),
                                      "box_format": box_format, "attempts": 1, "finish_reason": "stop",
                                      "usage": {"prompt_tokens": 812, "completion_tokens": 9}, "backend": "openai",
                                      "created_at": 1.0}
                            if first:
                                RunRecord.model_validate(record)  # the synthetic lines follow the contract
                                first = False
                            out.write(json.dumps(record) + "\n")
                            if form == "open" and task != "object_detection" \
                                    and not precheck_equivalent(output, row["answer"], row["answer_aliases"]):
                                answer = final_answer_text(output)
                                key = verdict_key(answer, row["answer"], "judge", JUDGE_PROMPT_VERSION)
                                if key not in judgements:
                                    verdict = "equivalent" if row["answer"] in answer and "possibly" not in answer \
                                        else "not_equivalent"
                                    judgements[key] = Judgement(
                                        key=key, answer=answer, gold=row["answer"], judge_model="judge",
                                        prompt_version=JUDGE_PROMPT_VERSION, verdict=verdict, method="llm",
                                        attempts=1).model_dump_json()
        (run_dir / "judgements.jsonl").write_text("\n".join(judgements.values()) + "\n", encoding="utf-8")
        (run_dir / "judge.json").write_text(json.dumps({"judge_model": "judge", "prompt_version": JUDGE_PROMPT_VERSION}))
        (run_dir / "run.json").write_text(json.dumps({"model": model, "release": str(release)}))
        run_dirs.append(run_dir)
    return run_dirs


CPU_SECONDS: dict[str, float] = {}


def _cpu() -> float:
    """CPU seconds of this process and of its finished worker processes."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def timed(label: str, function, *args, **kwargs):
    """(result, wall seconds); CPU seconds (workers included) go to CPU_SECONDS[label].

    The development machine is shared, so wall time swings with the load; CPU time does less.
    """
    started, cpu = time.perf_counter(), _cpu()
    result = function(*args, **kwargs)
    CPU_SECONDS[label] = _cpu() - cpu
    return result, time.perf_counter() - started


def index_bootstrap(counts: np.ndarray, resamples: int, rng: np.random.Generator, chunk: int = 25) -> tuple[float, float]:
    """The plain bootstrap, vectorised: draw resamples × n indices (in chunks to bound memory)."""
    n, values = len(counts), []
    for start in range(0, resamples, chunk):
        idx = rng.integers(0, n, size=(min(chunk, resamples - start), n))
        sums = counts[idx].sum(axis=1)
        values.append(micro_f1(sums[:, 0], sums[:, 1], sums[:, 2]))
    return percentile_interval(np.concatenate(values))


def scipy_bootstrap(counts: np.ndarray, resamples: int, seed: int) -> tuple[float, float]:
    def statistic(tp, fp, fn, axis=-1):
        return micro_f1(tp.sum(axis=axis), fp.sum(axis=axis), fn.sum(axis=axis))

    result = stats.bootstrap((counts[:, 0], counts[:, 1], counts[:, 2]), statistic, paired=True, vectorized=True,
                             n_resamples=resamples, method="percentile", random_state=seed, batch=25)
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--predictions", type=int, default=1_000_000)
    parser.add_argument("--models", type=int, default=5)
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--workdir", type=Path, default=None, help="Keep the generated data here (default: a temp dir).")
    args = parser.parse_args()
    configs = args.models * len(TASKS) * len(FORMS) * len(TEMPLATES)
    samples = max(1, round(args.predictions / configs))
    work = args.workdir or Path(tempfile.mkdtemp(prefix="mmbu-bench-scoring-"))
    rng = np.random.default_rng(0)
    total = samples * configs
    if (work / "runs").is_dir() and (work / "release").is_dir():
        run_dirs = sorted(p for p in (work / "runs").iterdir() if p.is_dir())
        print(f"reusing the data in {work}", flush=True)
    else:
        print(f"generating {total:,} predictions ({args.models} models x {configs // args.models} configs x "
              f"{samples} samples) in {work} ...", flush=True)
        gold = write_release(work / "release", samples, rng)
        run_dirs = write_runs(work / "runs", work / "release", gold, args.models, rng)

    (outcomes, warnings), load_s = timed("load", load_outcomes, run_dirs)
    assert not warnings, warnings
    assert len(outcomes) == total and outcomes["scored"].all()
    _, parallel_s = timed("parallel", load_outcomes, run_dirs, jobs=2)
    options = ScoreOptions(resamples=args.resamples, seed=0, by=("sub_modality",))
    report, aggregate_s = timed("aggregate", score_outcomes, outcomes, options)
    clustered = ScoreOptions(resamples=args.resamples, seed=0, by=("sub_modality",), cluster_by_image=True)
    _, clustered_s = timed("clustered", score_outcomes, outcomes, clustered)

    # one configuration, three bootstrap engines
    one = outcomes[(outcomes["model"] == "synthetic-model-0") & (outcomes["task"] == TASKS[0])
                   & (outcomes["form"] == "closed") & (outcomes["template"] == "no_context")]
    counts = one[["tp", "fp", "fn"]].to_numpy(float)
    ours, ours_s = timed("ours", bootstrap_f1, counts, resamples=args.resamples, rng=np.random.default_rng(1))
    plain, plain_s = timed("plain", index_bootstrap, counts, args.resamples, np.random.default_rng(2))
    peer, scipy_s = timed("scipy", scipy_bootstrap, counts, args.resamples, 3)

    # one run file, two readers
    path = run_dirs[0] / "predictions.jsonl"
    _, columnar_s = timed("columnar", read_records_frame, path, [])
    _, pydantic_s = timed("pydantic", read_records, path)

    load = os.getloadavg()[0]
    lines = [
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, load average {load:.1f} "
        f"during the run, Python {platform.python_version()}, numpy {np.__version__}",
        f"predictions: {total:,} ({args.models} models, {len(report.scores)} configurations, {len(report.deltas)} deltas, "
        f"{len(report.breakdowns)} sub-modality breakdown cells, {len(report.paired)} paired rows), {args.resamples} resamples",
        f"read + score every record: {load_s:.1f} s wall, {CPU_SECONDS['load']:.1f} s CPU "
        f"({total / load_s:,.0f} records/s); with --jobs 2: {parallel_s:.1f} s wall, {CPU_SECONDS['parallel']:.1f} s CPU",
        f"aggregate (F1 + CI per config, paired delta CIs, breakdowns, win/tie/loss): {aggregate_s:.1f} s wall, "
        f"{CPU_SECONDS['aggregate']:.1f} s CPU",
        f"aggregate, resampling by image: {clustered_s:.1f} s wall, {CPU_SECONDS['clustered']:.1f} s CPU",
        f"end to end: {load_s + aggregate_s:.1f} s wall",
        f"one configuration ({len(counts):,} records): multinomial bootstrap {ours_s * 1000:.1f} ms "
        f"CI [{ours.low:.4f}, {ours.high:.4f}]; plain index bootstrap {plain_s * 1000:.0f} ms "
        f"[{plain[0]:.4f}, {plain[1]:.4f}] (x{plain_s / ours_s:,.0f}); scipy.stats.bootstrap {scipy_s * 1000:.0f} ms "
        f"[{peer[0]:.4f}, {peer[1]:.4f}] (x{scipy_s / ours_s:,.0f})",
        f"one run file ({total // args.models:,} lines): columnar reader {columnar_s:.1f} s; pydantic "
        f"read_records {pydantic_s:.1f} s (x{pydantic_s / columnar_s:.1f})",
    ]
    print("\n".join(lines))
    if args.workdir is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
