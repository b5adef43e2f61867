"""Volumes: once the converter has chosen and written a mask's slice, read the regions from it.

A NIfTI image/mask pair is listed by its layout with the label values present in the volume but no
boxes, because the slice (and the reorientation) is the converter's choice. The converter writes
the mask slice through exactly the same transform as the image (`ConvertOptions(as_mask=True)`), so
regions read from that converted slice are already in the PNG's frame.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from mmbu.build.layouts.masks import MaskRules, regions_from_mask
from mmbu.build.layouts.sample import Sample
from mmbu.core.budget import OverBudget
from mmbu.core.exclusions import Exclusion
from mmbu.curation.manifest import DatasetManifest
from mmbu.curation.manifest.layout import ImageMaskPairsLayout, MaskFilesLayout


def with_converted_mask(sample: Sample, converted_mask: np.ndarray, manifest: DatasetManifest
                        ) -> tuple[Sample | None, list[Exclusion]]:
    """The sample with regions (and boxes, in the output frame) from its converted 2-D mask slice.

    Regions whose label is outside the manifest's vocabulary become exclusions; a slice with no
    usable region drops the sample.
    """
    layout = manifest.layout
    if not isinstance(layout, (ImageMaskPairsLayout, MaskFilesLayout)):
        raise TypeError(f"{manifest.id}: with_converted_mask needs a mask layout, not {layout.kind}")
    # the labels the layout gave each value when it listed the volume (a mask_files label_part included)
    listed = {r.mask_value: r.label for r in sample.regions if r.mask_value is not None}
    rules = MaskRules.of(layout)
    rules = replace(rules, labels={**rules.labels, **listed})
    exclusions: list[Exclusion] = []
    kept = []
    try:
        regions = regions_from_mask(converted_mask, rules, f"the converted mask slice of {sample.source_path}")
    except OverBudget as exc:
        return None, [Exclusion(dataset_id=sample.dataset_id, sample_id=sample.sample_id, item=sample.source_path,
                                stage="layout", reason=str(exc))]
    for region in regions:
        if manifest.label_spec(region.label) is None:
            exclusions.append(Exclusion(dataset_id=sample.dataset_id, sample_id=sample.region_id(region),
                                        item=f"{sample.source_path}#{region.instance}", stage="layout",
                                        reason=f"object label {region.label!r} is not in the manifest's label "
                                               "vocabulary"))
        else:
            kept.append(region)
    if not kept:
        exclusions.append(Exclusion(dataset_id=sample.dataset_id, sample_id=sample.sample_id,
                                    item=sample.source_path, stage="layout",
                                    reason="the converted mask slice holds no region with a known label"))
        return None, exclusions
    height, width = converted_mask.shape[:2]
    return sample.model_copy(update={"regions": tuple(kept), "image_size": (width, height)}), exclusions
