"""A small release built end to end from synthetic datasets through every library stage."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from PIL import Image
from support.build_manifests import make_manifest, write_png, write_taxonomy

from mmbu.build.layouts import (
    FrameMap,
    Region,
    map_boxes,
    map_mask,
    mask_box,
    read_mask,
    read_samples,
    region_mask,
)
from mmbu.build.metadata import normalise_metadata, validate_metadata
from mmbu.build.questions import attach_metadata, instantiate_questions, lint_questions, task_items
from mmbu.build.release import collect_build_info, group_by_task

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


def convert_half(sample, out_dir):
    """Stand-in for the converter: a PNG at half size plus its report line."""
    out = out_dir / f"{sample.sample_id}.png"
    with Image.open(sample.image_path) as image:
        image.resize((image.width // 2, image.height // 2)).save(out)
        return out, {"width": image.width // 2, "height": image.height // 2,
                     "params": {"source_size": [image.width, image.height]}}


def pipeline(raw, manifest, taxonomy, out_dir, halve=False):
    samples, layout_exclusions = read_samples(manifest, raw)
    valid, failures = validate_metadata(normalise_metadata(samples, manifest, taxonomy), taxonomy)
    assert failures.empty, failures.to_string()
    items, _ = attach_metadata(task_items(samples, manifest), valid)
    by_image = {s.sample_id: s for s in samples}
    images, widths, heights, boxes, others, masks = [], [], [], [], [], []
    for item in items.itertuples():
        sample = by_image[item.image_sample_id]
        if halve:
            png, record = convert_half(sample, out_dir)
        else:
            png, record = sample.image_path, {"width": sample.image_size[0], "height": sample.image_size[1]}
        frame = FrameMap(sample.image_size, (record["width"], record["height"]))
        images.append(str(png))
        widths.append(record["width"])
        heights.append(record["height"])
        boxes.append([list(b) for b in map_boxes(item.boxes, frame)] if item.boxes else None)
        others.append([list(b) for b in map_boxes(item.other_boxes, frame)] if item.other_boxes else None)
        if item.task == "mask_grounded_classification":
            region = Region(label=item.label, instance=item.region_instance, mask_value=int(item.mask_value),
                            component=None if pd.isna(item.component) else int(item.component))
            masks.append(map_mask(region_mask(read_mask(sample.mask_path), region), frame))
            boxes[-1] = [list(mask_box(masks[-1]))]  # the box of the resized mask, so both agree
        else:
            masks.append(None)
    rows = items.assign(image=images, image_width=widths, image_height=heights, boxes=boxes,
                        other_boxes=others, mask=masks)
    questions, dropped = instantiate_questions(rows, manifest, taxonomy, SEED)
    assert lint_questions(questions, taxonomy).empty
    return questions, [*layout_exclusions, *dropped]


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
    info = collect_build_info(seed=SEED, taxonomy_hash=taxonomy.content_hash, question_version="mmbu-questions-v1")
    return {"base": base, "rows_by_task": rows_by_task, "manifests": [marrow, glands], "build_info": info,
            "exclusions": [*x1, *x2], "taxonomy": taxonomy}
