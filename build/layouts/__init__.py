"""Read samples out of a fetched dataset as its manifest's layout describes.

Public face:
    read_samples(manifest, raw_dir, cache_dir) -> (list[Sample], list[Exclusion])
    read_samples_into(manifest, raw_dir, sink, cache_dir) -> (count, list[Exclusion])   (each sample to sink.append)
    Sample, Region, Exclusion, make_sample_id
    regions_from_mask, region_mask, read_mask, mask_box, mask_png (masks -> regions -> ROI PNG + box)
    geometry_of(report_line), map_boxes, map_mask                 (stored frame -> PNG frame)
    with_converted_mask(sample, converted_mask_slice, manifest)   (volumes: regions from the chosen slice)

A layout that does not match the files, labels without images, masks of the wrong size and labels
outside the manifest's vocabulary each become an `Exclusion`; nothing here raises for bad data.
"""
from __future__ import annotations

from pathlib import Path

from mmbu.build.layouts import (
    arrays, box_table, coco, folder_per_class, label_table, mask_files, mask_pairs, parquet, polygons, voc, volume_table, yolo,
)
from mmbu.build.layouts.context import LayoutContext, SampleSink
from mmbu.build.layouts.diagnose import check_patterns
from mmbu.build.layouts.frames import geometry_of, map_boxes, map_mask
from mmbu.build.layouts.masks import MaskError, mask_box, mask_png, read_mask, region_mask, regions_from_mask
from mmbu.build.layouts.sample import Region, Sample, make_sample_id
from mmbu.build.layouts.volumes import with_converted_mask
from mmbu.core.boxes import Box
from mmbu.core.confinement import OutsideFolder
from mmbu.core.exclusions import EXCLUSION_COLUMNS, Exclusion
from mmbu.curation.manifest import DatasetManifest

# layout kind -> reader; a new layout is a new module plus one line here
READERS = {
    "folder_per_class": folder_per_class.read,
    "label_table": label_table.read,
    "coco": coco.read,
    "yolo": yolo.read,
    "voc": voc.read,
    "image_mask_pairs": mask_pairs.read,
    "mask_files": mask_files.read,
    "arrays": arrays.read,
    "box_table": box_table.read,
    "polygons": polygons.read,
    "parquet": parquet.read,
    "volume_table": volume_table.read,
}


def read_samples(manifest: DatasetManifest, raw_dir: str | Path, cache_dir: str | Path | None = None
                 ) -> tuple[list[Sample], list[Exclusion]]:
    """All usable samples of one fetched dataset (`$MMBU_DATA/raw/<id>/`) and the items dropped on the way.

    `cache_dir` receives the images and masks a layout derives (array slices, table cells, assembled
    masks; see `derived`); the build passes `$MMBU_DATA/work/<id>/layout-cache`.
    """
    samples: list[Sample] = []
    _, exclusions = read_samples_into(manifest, raw_dir, samples, cache_dir)
    return samples, exclusions


def read_samples_into(manifest: DatasetManifest, raw_dir: str | Path, sink: SampleSink,
                      cache_dir: str | Path | None = None) -> tuple[int, list[Exclusion]]:
    """`read_samples`, each sample handed to `sink.append` as the layout finds it (in the same order) instead of
    kept: the build writes them to `samples.jsonl`, so a layout's memory does not grow with its samples. Returns
    the number of samples and the exclusions."""
    ctx = LayoutContext(manifest=manifest, raw_dir=Path(raw_dir), cache_dir=Path(cache_dir) if cache_dir else None,
                        samples=sink)
    if not ctx.raw_dir.is_dir():
        ctx.exclude(str(raw_dir), "the dataset has not been fetched: its raw folder does not exist")
        return 0, ctx.exclusions
    try:
        READERS[manifest.layout.kind](manifest.layout, ctx)
    except OutsideFolder as exc:  # the manifest names a file outside the dataset's folder: nothing of it is read
        ctx.exclude(str(raw_dir), f"{exc}; the samples read before it are kept")
    except Exception as exc:  # noqa: BLE001 - a reader bug or an unreadable file must not stop the build
        ctx.exclude(str(raw_dir), f"the {manifest.layout.kind} layout stopped early ({type(exc).__name__}: {exc}); "
                                  f"the samples read before it are kept")
    try:
        ctx.finish()  # DICOM whole-slide series listed file by file: one sample each
    except Exception as exc:  # noqa: BLE001 - same rule: report, keep the rest
        ctx.exclude(str(raw_dir), f"grouping the DICOM whole-slide series stopped early ({type(exc).__name__}: "
                                  f"{exc}); the other samples are kept")
    if not ctx.sample_count and not ctx.exclusions:  # say which pattern misses, and what lies nearest (`diagnose`)
        missed = [check.sentence() for check in check_patterns(manifest.layout, ctx.raw_dir) if not check.matched]
        ctx.exclude(str(raw_dir), f"the {manifest.layout.kind} layout found no sample in the fetched files"
                                  + (": " + "; ".join(missed) if missed else ""))
    return ctx.sample_count, ctx.exclusions


__all__ = [
    "EXCLUSION_COLUMNS", "Box", "Exclusion", "MaskError", "READERS", "Region", "Sample",
    "geometry_of", "make_sample_id", "map_boxes", "map_mask", "mask_box", "mask_png", "read_mask", "read_samples", "read_samples_into",
    "region_mask", "regions_from_mask", "with_converted_mask",
]
