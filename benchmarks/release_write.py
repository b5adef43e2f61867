"""Release writing vs Hugging Face `datasets` writing the same rows to Parquet.

    .venv/bin/python -m benchmarks.release_write [--images 400] [--size 512] [--runs 3] [--baseline-ref REF]
                                                 [--instances K]

Each tool runs in its own child process (fresh interpreter, so peak RSS is its own): ours is
`mmbu.build.release.write_release` (shards, card, croissant, checksums, stats); the peer is
`datasets.Dataset.from_generator(features=...)` + `Dataset.to_parquet`, which embeds the same PNGs
in the same `Image` feature but writes one Parquet file and nothing else. Inputs are noise PNGs
(incompressible, so the byte volume is what it says); the tools take turns, run by run. Reported: median
wall time, peak RSS, output size, and our/peer ratios. `--baseline-ref` adds a third tool: our writer as of a git commit
(its `build/release/` extracted with `git archive` and put first on `mmbu.build`'s package path),
to compare the current writer with an earlier one on the same inputs. `--instances K` makes each image the image of
K `mask_grounded_classification` rows, each with its own small ROI mask PNG (a per-instance dataset: the image is
shared by its rows).
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHILD = r'''
import json, sys, time
from pathlib import Path
import pandas as pd
tool, inputs, out = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
if tool.startswith("mmbu@"):  # an earlier writer: its release package shadows the installed one
    import mmbu.build
    mmbu.build.__path__.insert(0, str(inputs / tool))
rows = pd.read_json(inputs / "rows.json", dtype=False)
task = rows["task"].iloc[0]
start = time.perf_counter()
if tool.startswith("mmbu"):
    from mmbu.build.release import write_release
    from mmbu.curation.manifest import DatasetManifest
    manifest = DatasetManifest.model_validate(json.loads((inputs / "manifest.json").read_text()))
    write_release({task: rows}, out, [manifest], {"seeds": {"questions": 0}})
else:
    import datasets
    from mmbu.build.release import release_features
    features = release_features()
    def generate():
        for row in rows.to_dict(orient="records"):
            record = {column: row.get(column) for column in features}
            record["image"] = {"bytes": Path(row["image"]).read_bytes(), "path": Path(row["image"]).name}
            mask = row.get("mask")
            record["mask"] = {"bytes": Path(mask).read_bytes(), "path": Path(mask).name} if mask else None
            record["boxes"] = row.get("boxes")
            record["answer_aliases"] = []
            yield record
    dataset = datasets.Dataset.from_generator(generate, features=features, cache_dir=str(out / "cache"))
    dataset.to_parquet(str(out / "data.parquet"))
import resource
print(json.dumps({"seconds": time.perf_counter() - start,
                  "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
'''


def make_inputs(directory: Path, images: int, size: int, instances: int = 0) -> int:
    """Noise PNGs plus release rows pointing at them (with `instances`, that many mask rows per image, each with its
    own ROI mask); returns the PNG bytes in total, each file counted once."""
    import numpy as np
    from PIL import Image

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from support.build_manifests import make_manifest

    rng = np.random.default_rng(0)
    manifest = make_manifest({"kind": "folder_per_class"})
    rows, total = [], 0
    labels = ["monocyte", "promyelocyte", "proerythroblast", "band neutrophil", "lymphocyte"]
    for index in range(images):
        path = directory / f"img{index:05d}.png"
        Image.fromarray(rng.integers(0, 256, (size, size, 3), dtype=np.uint8)).save(path, compress_level=1)
        total += path.stat().st_size
        row = {
            "sample_id": f"demo_marrow-{index:016x}", "dataset_id": manifest.id, "image": str(path),
            "answer": labels[index % 5], "options": labels, "question_no_context": "Which cell type?",
            "question_modality": "Which cell type in this light microscopy image?",
            "question_full_context": "Which cell type in this brightfield microscopy image of a smear?",
            "license": manifest.license, "task": "ungrounded_classification", "label": labels[index % 5],
            "modality": "light microscopy", "sub_modality": "brightfield microscopy", "specimen": "human",
            "domain": "Hematology", "image_width": size, "image_height": size,
        }
        if not instances:
            rows.append(row)
        for instance in range(instances):
            mask = np.zeros((size, size), np.uint8)
            y, x = rng.integers(0, size - 16, 2)
            mask[y:y + 12, x:x + 12] = 255
            mask_path = directory / f"img{index:05d}-roi{instance:03d}.png"
            Image.fromarray(mask).save(mask_path)
            total += mask_path.stat().st_size
            # row ids are hashes: an image's rows are scattered among the others' in sample id order
            sample_id = f"demo_marrow-{(index * 7919 + instance * 104729) % 2**40:016x}"
            rows.append({**row, "sample_id": sample_id, "image_sample_id": row["sample_id"], "mask": str(mask_path),
                         "boxes": [[int(x), int(y), int(x) + 12, int(y) + 12]],
                         "task": "mask_grounded_classification"})
    (directory / "rows.json").write_text(json.dumps(rows))
    (directory / "manifest.json").write_text(manifest.model_dump_json())
    return total


def run_tool(tool: str, inputs: Path, out: Path) -> tuple[float, float, int]:
    """(seconds, peak RSS MiB, output bytes) of one child run."""
    done = subprocess.run([sys.executable, "-c", CHILD, tool, str(inputs), str(out)], capture_output=True, text=True,
                          check=True)
    measured = json.loads(done.stdout.strip().splitlines()[-1])  # the child's own peak, not its siblings'
    written = sum(p.stat().st_size for p in out.rglob("*.parquet") if "cache" not in p.parts)
    return measured["seconds"], measured["peak_mib"], written


def extract_writer(ref: str, inputs: Path) -> str:
    """`build/release/` as of git `ref` into `inputs/mmbu@REF/release`; returns the tool name."""
    tool = f"mmbu@{ref}"
    target = inputs / tool
    target.mkdir()
    repo = Path(__file__).resolve().parents[1]
    archive = subprocess.run(["git", "-C", str(repo), "archive", ref, "build/release"], capture_output=True,
                             check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(target), "--strip-components=1"], input=archive, check=True)
    return tool


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=400)
    parser.add_argument("--size", type=int, default=512)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--baseline-ref", help="also run the release writer as of this git commit")
    parser.add_argument("--instances", type=int, default=0, help="mask rows sharing each image (0: one ungrounded "
                                                                 "row per image)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        inputs = Path(scratch) / "inputs"
        inputs.mkdir()
        total = make_inputs(inputs, args.images, args.size, args.instances)
        tools = ["mmbu", "datasets"] + ([extract_writer(args.baseline_ref, inputs)] if args.baseline_ref else [])
        # round robin, so that the load of a shared machine drifting during the run weighs on every tool alike
        runs: dict[str, list] = {tool: [] for tool in tools}
        for k in range(args.runs):
            for tool in tools:
                runs[tool].append(run_tool(tool, inputs, Path(scratch) / f"{tool}-{k}"))
        results = {tool: (statistics.median(r[0] for r in done), max(r[1] for r in done), done[0][2])
                   for tool, done in runs.items()}
        shared = f", {args.instances} mask rows each" if args.instances else ""
        print(f"{args.images} noise PNGs of {args.size}x{args.size}{shared} ({total / 2**20:.0f} MiB of PNG), median of "
              f"{args.runs}")
        print("| tool | wall s | MiB/s | peak RSS MiB | Parquet MiB |")
        print("|---|---|---|---|---|")
        for tool, (seconds, peak, written) in results.items():
            print(f"| {tool} | {seconds:.2f} | {total / 2**20 / seconds:.0f} | {peak:.0f} | {written / 2**20:.0f} |")
        ours, peer = results["mmbu"], results["datasets"]
        print(f"time ratio mmbu/datasets: {ours[0] / peer[0]:.2f}x; peak RSS ratio: {ours[1] / peer[1]:.2f}x")
        if args.baseline_ref:
            before = results[tools[-1]]
            print(f"time ratio mmbu/{tools[-1]}: {ours[0] / before[0]:.2f}x; peak RSS ratio: {ours[1] / before[1]:.2f}x")


if __name__ == "__main__":
    main()
