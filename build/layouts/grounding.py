"""Place task items on their converted PNGs: image path and size, boxes and ROI masks in PNG pixels.

The pipeline converts each sample's image (and, for volumes, its mask slice) and hands the results
here as conversion-report records; this module carries boxes and masks through each record's
`ConversionGeometry` so the question and release stages only ever see output-frame geometry.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mmbu.build.layouts.frames import geometry_of, map_boxes, map_mask
from mmbu.build.layouts.masks import MaskError, mask_box, mask_png, read_mask, region_mask
from mmbu.build.layouts.sample import Region, Sample
from mmbu.build.records import records
from mmbu.core.exclusions import Exclusion
from mmbu.core.geometry import ConversionGeometry


@dataclass(frozen=True)
class ConvertedImage:
    """One converted sample: the PNG, its report line (DESIGN §3.2) and, for volumes, the converted
    label-mask PNG (already in the output frame, same transform as the image)."""

    png: Path
    record: Mapping[str, Any]
    mask_png: Path | None = None


def _is_set(value: object) -> bool:
    return value is not None and not (isinstance(value, float) and pd.isna(value))


def _geometry(conversion: ConvertedImage) -> ConversionGeometry:
    if conversion.mask_png is not None:  # volumes: regions were read from the converted slice
        return ConversionGeometry.kept((int(conversion.record["width"]), int(conversion.record["height"])))
    return geometry_of(conversion.record)


def place_items(items: pd.DataFrame, samples: Mapping[str, Sample], converted: Mapping[str, ConvertedImage],
                roi_dir: Path) -> tuple[pd.DataFrame, list[Exclusion]]:
    """Items (from `task_items`) with `image`, `image_width`, `image_height`, and `boxes`,
    `other_boxes`, `mask` in the PNG frame. Keys of `samples`/`converted` are image sample ids.

    A mask-grounded row's ROI is written here, once, as the PNG the release embeds
    (`roi_dir/<row sample id>.png`, 255 inside), and `mask` is its path; its box is the box of the
    resized mask, so the two agree exactly. A region that vanishes in downscaling, or an image
    without a conversion, becomes an exclusion.
    """
    placed: list[dict[str, object]] = []
    exclusions: list[Exclusion] = []
    # the last mask read: a sample's items are consecutive, so one entry serves them all and memory stays one mask
    # whatever the dataset's size (a dict of every mask held 300 MB at 8,600 image/mask pairs)
    masks: dict[str, np.ndarray] = {}
    components: dict[int, np.ndarray] = {}  # of that mask's values, labelled once for all of its regions
    # the last image's geometry (parsed from its record once for all of its items) and whether roi_dir exists
    geometry, geometry_of_image, roi_dir_made = None, None, False
    for item in records(items):
        def drop(reason: str, stage: str = "layout") -> None:
            exclusions.append(Exclusion(dataset_id=item["dataset_id"], sample_id=item["sample_id"],
                                        item=str(item["source_path"]), stage=stage, reason=reason))

        conversion = converted.get(item["image_sample_id"])
        if conversion is None:
            drop("the image has no converted PNG (see the conversion report)", stage="convert")
            continue
        sample = samples[item["image_sample_id"]]
        if geometry_of_image != item["image_sample_id"]:
            geometry, geometry_of_image = _geometry(conversion), item["image_sample_id"]
        if conversion.mask_png is None:
            if item["task"] != "ungrounded_classification" and sample.image_size \
                    and tuple(sample.image_size) != geometry.stored_size:
                (lw, lh), (cw, ch) = sample.image_size, geometry.stored_size
                drop(f"the layout read the image as {lw} x {lh} pixels but the converter read {cw} x {ch}, so its "
                     "boxes cannot be placed on the PNG", stage="convert")
                continue
        row = dict(item, image=str(conversion.png), image_width=geometry.output_size[0],
                   image_height=geometry.output_size[1], mask=None)
        for column in ("boxes", "other_boxes"):
            row[column] = [list(b) for b in map_boxes(item[column], geometry)] if _is_set(item[column]) else None
        if item["task"] == "mask_grounded_classification":
            mask_file = conversion.mask_png or sample.mask_path
            try:
                if str(mask_file) not in masks:
                    masks, components = {str(mask_file): read_mask(Path(mask_file))}, {}
            except MaskError as exc:
                drop(str(exc))
                continue
            region = Region(label=str(item["label"]), instance=str(item["region_instance"]),
                            mask_value=int(item["mask_value"]),
                            component=int(item["component"]) if _is_set(item["component"]) else None)
            roi = map_mask(region_mask(masks[str(mask_file)], region, components), geometry)
            box = mask_box(roi)
            if box is None:
                drop("the region is too small to survive the conversion's downscaling")
                continue
            # written in place, not fsynced: the rows step syncs once before it records itself done, and a
            # rows step that did not finish is run again whole, rewriting every ROI (mmbu.core.files)
            roi_path = Path(roi_dir) / f"{item['sample_id']}.png"
            if not roi_dir_made:
                roi_path.parent.mkdir(parents=True, exist_ok=True)
                roi_dir_made = True
            roi_path.write_bytes(mask_png(roi))
            row["mask"] = str(roi_path)
            row["boxes"] = [list(box)]
        placed.append(row)
    columns = list(dict.fromkeys([*items.columns, "image", "image_width", "image_height", "mask"]))
    return pd.DataFrame(placed, columns=columns), exclusions
