"""One annotation file per image, paired with it by templates with named parts (polygons' `aperio_xml` and
`geojson`, box_table's `annotations`): `Annotations/{stem}.xml` with `Tissue Images/{stem}.tif`."""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from mmbu.build.layouts.context import LayoutContext
from mmbu.curation.manifest.templates import PathTemplate


def paired_files(ctx: LayoutContext, images: str, annotations: str) -> Iterator[tuple[Path, Path]]:
    """(annotation file, image) pairs of the two templates, by the parts they share; an annotation without an
    image and an image without an annotation are reported."""
    image_template, annotation_template = PathTemplate(images), PathTemplate(annotations)
    shared = [n for n in annotation_template.names if n in image_template.names]
    by_key = {tuple(parts[n] for n in shared): path for path, parts in image_template.scan(ctx.raw_dir)}
    paired: set[Path] = set()
    for annotation, parts in annotation_template.scan(ctx.raw_dir):
        image = by_key.get(tuple(parts[n] for n in shared))
        if image is None:
            ctx.exclude(ctx.rel(annotation), "annotation without a matching image")
            continue
        paired.add(image)
        yield annotation, image
    for image in sorted(set(by_key.values()) - paired):
        if not ctx.list_unannotated_slide_instance(image):
            ctx.exclude(ctx.rel(image), f"no annotation file matching {annotations!r} for this image")
