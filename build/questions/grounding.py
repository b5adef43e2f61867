"""Place task items on their converted PNGs (`rows.PlacedItem`): image path and size, boxes and ROI masks in PNG
pixels.

The pipeline converts each sample's image (and, for volumes, its mask slice) and hands the results
here as conversion-report records; this module carries boxes and masks through each record's
`ConversionGeometry` so the question and release stages only ever see output-frame geometry.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mmbu.build.layouts.frames import geometry_of, map_boxes, map_mask
from mmbu.build.layouts.masks import MaskError, mask_box, mask_png, read_mask, region_mask
from mmbu.build.questions.rows import PlacedItem, TaskItem
from mmbu.core.boxes import Box, PixelBox
from mmbu.core.exclusions import Exclusion
from mmbu.core.geometry import ConversionGeometry
from mmbu.core.release import Task


@dataclass(frozen=True)
class ConvertedImage:
    """One converted sample: the PNG, its report line (docs/architecture.md §3.2) and, for volumes, the converted
    label-mask PNG (already in the output frame, same transform as the image)."""

    png: Path
    record: Mapping[str, Any]
    mask_png: Path | None = None


def _geometry(conversion: ConvertedImage) -> ConversionGeometry:
    if conversion.mask_png is not None:  # volumes: regions were read from the converted slice
        return ConversionGeometry.kept((int(conversion.record["width"]), int(conversion.record["height"])))
    return geometry_of(conversion.record)


def _placed(boxes: tuple[Box, ...] | None, geometry: ConversionGeometry) -> tuple[PixelBox, ...] | None:
    return None if boxes is None else tuple(map_boxes(boxes, geometry))


def place_items(items: Iterable[TaskItem], converted: Mapping[str, ConvertedImage], roi_dir: Path
                ) -> tuple[list[PlacedItem], list[Exclusion]]:
    """Items (from `task_items`, a sample's items together) on their PNGs: boxes in the PNG's pixels and, for a
    mask-grounded item, its ROI. `converted` is keyed by image sample id.

    A mask-grounded item's ROI is written here, once, as the PNG the release embeds (`roi_dir/<item sample
    id>.png`, 255 inside); its box is the box of the resized mask, so the two agree exactly. A region that
    vanishes in downscaling, or an image without a conversion, becomes an exclusion.
    """
    placed: list[PlacedItem] = []
    exclusions: list[Exclusion] = []
    # the last mask read: a sample's items are consecutive, so one entry serves them all and memory stays one mask
    # whatever the dataset's size (a dict of every mask held 300 MB at 8,600 image/mask pairs)
    masks: dict[str, np.ndarray] = {}
    components: dict[int, np.ndarray] = {}  # of that mask's values, labelled once for all of its regions
    # the last image's geometry (parsed from its record once for all of its items) and whether roi_dir exists
    geometry, geometry_of_image, roi_dir_made = None, None, False
    for item in items:
        sample = item.sample

        def drop(reason: str, stage: str = "layout") -> None:
            exclusions.append(Exclusion(dataset_id=sample.dataset_id, sample_id=item.sample_id,
                                        item=item.source_path, stage=stage, reason=reason))

        conversion = converted.get(sample.sample_id)
        if conversion is None:
            drop("the image has no converted PNG (see the conversion report)", stage="convert")
            continue
        if geometry_of_image != sample.sample_id:
            geometry, geometry_of_image = _geometry(conversion), sample.sample_id
        if conversion.mask_png is None:
            if item.task != Task.UNGROUNDED and sample.image_size and tuple(sample.image_size) != geometry.stored_size:
                (lw, lh), (cw, ch) = sample.image_size, geometry.stored_size
                drop(f"the layout read the image as {lw} x {lh} pixels but the converter read {cw} x {ch}, so its "
                     "boxes cannot be placed on the PNG", stage="convert")
                continue
        boxes, roi_path = _placed(item.boxes, geometry), None
        if item.task == Task.MASK_GROUNDED:
            mask_file = str(conversion.mask_png or sample.mask_path)
            try:
                if mask_file not in masks:
                    masks, components = {mask_file: read_mask(Path(mask_file))}, {}
            except MaskError as exc:
                drop(str(exc))
                continue
            roi = map_mask(region_mask(masks[mask_file], item.region, components), geometry)
            box = mask_box(roi)
            if box is None:
                drop("the region is too small to survive the conversion's downscaling")
                continue
            # written in place, not fsynced: the rows step syncs once before it records itself done, and a
            # rows step that did not finish is run again whole, rewriting every ROI (mmbu.core.files)
            roi_path = Path(roi_dir) / f"{item.sample_id}.png"
            if not roi_dir_made:
                roi_path.parent.mkdir(parents=True, exist_ok=True)
                roi_dir_made = True
            roi_path.write_bytes(mask_png(roi))
            boxes = (tuple(box),)
        placed.append(PlacedItem(item, conversion.png, geometry.output_size, boxes,
                                 _placed(item.other_boxes, geometry), roi_path))
    return placed, exclusions
