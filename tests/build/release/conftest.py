"""A small release built end to end from synthetic datasets through every library stage."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image
from support.build_manifests import make_manifest, write_png, write_taxonomy

from mmbu.build.layouts import read_samples
from mmbu.build.metadata import normalise_metadata, validate_metadata
from mmbu.build.questions import (ConvertedImage, attach_metadata, instantiate_questions, lint_questions, place_items,
                                  rows_frame, task_items)
from mmbu.build.release import RowsFiles, collect_build_info, group_by_task
from mmbu.build.sorted_runs import SortedRuns
from mmbu.build.steps import ROWS_ORDER, write_rows_file
from mmbu.core.geometry import ConversionGeometry

SEED = 20260606


def marrow_dataset(raw):
    for label in ("MON", "PMY", "EBO", "BNE", "LYT", "EOS"):
        for k in range(2):
            write_png(raw / label / f"{label.lower()}_{k}.png", value=40 * k)
    return make_manifest({"kind": "folder_per_class"})


def gland_dataset(raw):
    """Images 64x48 with masks; the 'converter' halves them, so boxes and masks must follow."""
    for k in range(3):
        write_png(raw / "images" / f"g{k}.png", size=(64, 48), value=10 * k)
        mask = np.zeros((48, 64), np.uint8)
        mask[4:20, 4:24] = 1
        mask[30:44, 40:60] = 1
        mask[24:30, 2 + k: 12 + k] = 2
        (raw / "masks").mkdir(exist_ok=True)
        Image.fromarray(mask).save(raw / "masks" / f"g{k}_mask.png")
    return make_manifest(
        {"kind": "image_mask_pairs", "images": "images/*.png", "masks": "masks/*.png", "mask_suffix": "_mask",
         "mask_values": {1: "gland", 2: "stroma"}, "instances": "components"},
        dataset_id="demo_glands", labels={"gland": "gland", "stroma": "stroma", "lumen": "lumen",
                                          "nucleus": "nucleus", "vessel": "blood vessel"},
        tasks=["box_grounded_classification", "mask_grounded_classification", "object_detection"],
        metadata={"dataset_name": "Demo glands", "domain": "Pathology", "modality": "digital pathology",
                  "sub_modality": "whole-slide imaging", "stain": "H&E", "specimen_subregion": "breast",
                  "url": "https://example.org/glands"},
        questions={"options_name": "tissue structure", "preparation": "section"}, license="CC-BY-SA-4.0")


def convert(sample, out_dir, halve):
    """Stand-in for the converter: a PNG (at half size when asked) plus its report line."""
    out = out_dir / f"{sample.sample_id}.png"
    with Image.open(sample.image_path) as image:
        size = (image.width // 2, image.height // 2) if halve else image.size
        image.resize(size).save(out)
        geometry = ConversionGeometry.scaled(image.size, size)
    return ConvertedImage(png=out, record={"width": size[0], "height": size[1], "params": {"geometry": geometry.to_json()}})


def pipeline(raw, manifest, taxonomy, out_dir, halve=False):
    samples, layout_exclusions = read_samples(manifest, raw)
    valid, failures = validate_metadata(normalise_metadata(samples, manifest, taxonomy), taxonomy)
    assert failures.empty, failures.to_string()
    items, _ = attach_metadata(task_items(samples, manifest), valid)
    converted = {s.sample_id: convert(s, out_dir, halve) for s in samples}
    placed, placing = place_items(items, converted, out_dir / "roi")
    assert placing == []
    questions, dropped = instantiate_questions(placed, manifest, taxonomy, SEED)
    assert lint_questions(questions, taxonomy).empty
    return rows_frame(questions), [*layout_exclusions, *dropped]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    base = tmp_path_factory.mktemp("release")
    taxonomy = write_taxonomy(base)
    converted = base / "converted"
    converted.mkdir()
    marrow = marrow_dataset(base / "raw" / "demo_marrow")
    glands = gland_dataset(base / "raw" / "demo_glands")
    write_png(base / "raw" / "demo_marrow" / "XYZ" / "stray.png")  # an unknown label -> an exclusion
    q1, x1 = pipeline(base / "raw" / "demo_marrow", marrow, taxonomy, converted)
    q2, x2 = pipeline(base / "raw" / "demo_glands", glands, taxonomy, converted, halve=True)
    rows_by_task = group_by_task([q1, q2])
    info = collect_build_info(seed=SEED, taxonomy_hash=taxonomy.content_hash, question_version="mmbu-questions-v2")
    return {"base": base, "rows_by_task": rows_by_task, "manifests": [marrow, glands], "build_info": info,
            "exclusions": [*x1, *x2], "taxonomy": taxonomy}


@pytest.fixture
def rows_files_of():
    """The writer's input as the build hands it: `rows_files_of(rows_by_task, folder)` deals the rows to `parts`
    rows.parquet files written by the rows step's writer (two chunks each), every file holding every task, at random
    so that their sample ids interleave; returns `RowsFiles` per task."""
    def make(rows_by_task: dict[str, pd.DataFrame], folder: Path, parts: int = 3) -> dict[str, RowsFiles]:
        rows = pd.concat(rows_by_task.values(), ignore_index=True)
        rows = rows.iloc[np.random.default_rng(5).permutation(len(rows))].reset_index(drop=True)
        folder.mkdir()
        paths = []
        for part in range(parts):
            mine = rows.iloc[part::parts].reset_index(drop=True)
            paths.append(folder / f"part{part}.parquet")
            with SortedRuns(paths[-1], ROWS_ORDER) as runs:
                runs.add(mine.iloc[: len(mine) // 2])
                runs.add(mine.iloc[len(mine) // 2:])
                write_rows_file(runs, paths[-1])
        firsts = sorted(pd.read_parquet(p, columns=["sample_id"])["sample_id"].min() for p in paths)
        lasts = sorted(pd.read_parquet(p, columns=["sample_id"])["sample_id"].max() for p in paths)
        assert firsts[-1] < lasts[0]  # every file's ids reach into every other's
        return {task: RowsFiles(tuple((str(p), frozenset()) for p in paths), task, len(frame))
                for task, frame in rows_by_task.items()}

    return make
