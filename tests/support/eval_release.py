"""A small MMBU release written the way the build writes it (pyarrow, HF ``Image`` struct cells).

Each image is dark noise with one bright rectangle (the "object") at a known box, drawn with
Pillow, so detection answers can be checked at pixel level. Columns are exactly docs/architecture.md §3.4 plus
``answer_aliases``.
"""
from __future__ import annotations

import io
import random
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from PIL import Image, ImageDraw

TASKS = ("ungrounded_classification", "box_grounded_classification", "mask_grounded_classification", "object_detection")
LABELS = ("nucleus", "mitochondrion", "red blood cell", "platelet")
METADATA = {
    "image_source": "loopback-fixture", "dataset_name": "Fixture Cells", "domain": "Hematology",
    "modality": "light microscopy", "sub_modality": "Brightfield Microscopy", "stain": "Giemsa",
    "specimen": "human", "specimen_subregion": "peripheral blood", "topic": "cell type",
    "original_task": "classification", "context": "thin blood smear", "institution": "Fixture Lab",
    "url": "https://example.org/fixture",
}
HF_IMAGE = pa.struct([("bytes", pa.binary()), ("path", pa.string())])


def png(image: Image.Image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def object_image(size: tuple[int, int], box: tuple[int, int, int, int], seed: int) -> Image.Image:
    """Dark noisy background with a bright filled rectangle covering exactly `box` (x2, y2 exclusive)."""
    rng = np.random.default_rng(seed)
    w, h = size
    pixels = rng.integers(10, 40, size=(h, w, 3), dtype=np.uint8)
    image = Image.fromarray(pixels, "RGB")
    ImageDraw.Draw(image).rectangle([box[0], box[1], box[2] - 1, box[3] - 1], fill=(235, 230, 220))
    return image


def _shade(image: Image.Image, grey: bool) -> Image.Image:
    return image.convert("L") if grey else image


def mask_image(size: tuple[int, int], box: tuple[int, int, int, int]) -> Image.Image:
    mask = Image.new("L", size, 0)
    ImageDraw.Draw(mask).ellipse([box[0], box[1], box[2] - 1, box[3] - 1], fill=255)
    return mask


def _box_text(box: tuple[int, ...] | list[float]) -> str:
    return "[" + ", ".join(str(int(v)) for v in box) + "]"


def make_rows(task: str, count: int, size: tuple[int, int], seed: int, grey: bool = False) -> list[dict]:
    rng = random.Random(f"{task}-{seed}")
    rows = []
    for index in range(count):
        w, h = size
        bw, bh = rng.randint(w // 6, w // 3), rng.randint(h // 6, h // 3)
        x1, y1 = rng.randint(0, w - bw - 1), rng.randint(0, h - bh - 1)
        box = (x1, y1, x1 + bw, y1 + bh)
        label = LABELS[index % len(LABELS)]
        row = {
            "sample_id": f"{task[:4]}-{index:04d}", "dataset_id": "fixture_cells",
            "image": {"bytes": png(_shade(object_image(size, box, seed * 1000 + index), grey)), "path": f"{index:04d}.png"},
            "boxes": None, "mask": None, "target": None, **METADATA, "license": "CC-BY-4.0",
            "answer_aliases": [label.upper()],
        }
        if task == "object_detection":
            decoys = []
            while len(decoys) < 3:
                dx, dy = rng.randint(0, w - bw - 1), rng.randint(0, h - bh - 1)
                if abs(dx - x1) > bw and abs(dy - y1) > bh:
                    decoys.append(_box_text((dx, dy, dx + bw, dy + bh)))
            options = [_box_text(box), *decoys]
            rng.shuffle(options)
            options.append("None of the above")
            row.update(boxes=[list(map(float, box))], target=label, answer=_box_text(box), options=options,
                       question_no_context=f'Where is the "{label}" in this image?',
                       question_modality=f'In this light microscopy image, where is the "{label}"?',
                       question_full_context=f'In this Giemsa-stained light microscopy image of a human blood smear, where is the "{label}"?',
                       answer_aliases=[])
        else:
            distractors = [lab for lab in LABELS if lab != label][:3]
            options = [label, *distractors]
            rng.shuffle(options)
            options.append("None of the above")
            region = {"box_grounded_classification": " in the outlined region",
                      "mask_grounded_classification": " in the outlined region"}.get(task, "")
            row.update(answer=label, options=options,
                       question_no_context=f"What is shown{region}?",
                       question_modality=f"In this light microscopy image, what is shown{region}?",
                       question_full_context=f"In this Giemsa-stained light microscopy image of a human blood smear, what is shown{region}?")
            if task == "box_grounded_classification":
                row["boxes"] = [list(map(float, box))]
            if task == "mask_grounded_classification":
                row["mask"] = {"bytes": png(mask_image(size, box)), "path": None}
        rows.append(row)
    return rows


SCHEMA_FIELDS = [
    ("sample_id", pa.string()), ("dataset_id", pa.string()), ("image", HF_IMAGE),
    ("boxes", pa.list_(pa.list_(pa.float64()))), ("mask", HF_IMAGE), ("target", pa.string()),
    ("answer", pa.string()), ("options", pa.list_(pa.string())),
    ("question_no_context", pa.string()), ("question_modality", pa.string()), ("question_full_context", pa.string()),
    *[(name, pa.string()) for name in METADATA], ("license", pa.string()), ("answer_aliases", pa.list_(pa.string())),
]


def write_release(root: str | Path, *, tasks: tuple[str, ...] = TASKS, count: int = 4, size: tuple[int, int] = (320, 240),
                  seed: int = 0, drop_column: str | None = None, shards: int = 1, grey: bool = False) -> Path:
    """Write ``root/data/<task>/train-0000i-of-0000n.parquet`` and return `root`."""
    root = Path(root)
    fields = [(n, t) for n, t in SCHEMA_FIELDS if n != drop_column]
    schema = pa.schema(fields)
    for task in tasks:
        rows = make_rows(task, count, size, seed, grey)
        folder = root / "data" / task
        folder.mkdir(parents=True, exist_ok=True)
        per_shard = -(-len(rows) // shards)
        for shard in range(shards):
            part = rows[shard * per_shard:(shard + 1) * per_shard]
            table = pa.Table.from_pylist([{n: r[n] for n, _ in fields} for r in part], schema=schema)
            pq.write_table(table, folder / f"train-{shard:05d}-of-{shards:05d}.parquet")
    return root
