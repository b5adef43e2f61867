"""Pascal VOC XML: one file per image with `<object><name>` and `<bndbox>` (1-based inclusive pixels)."""
from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from mmbu.build.layouts.boxes import clip_box
from mmbu.build.layouts.context import LayoutContext
from mmbu.build.layouts.files import glob_files, image_size
from mmbu.build.layouts.pairing import paired_files
from mmbu.build.layouts.sample import Region
from mmbu.core import budget
from mmbu.curation.manifest.layout import VocLayout


def read(layout: VocLayout, ctx: LayoutContext) -> None:
    if layout.images is not None:
        for xml_path, image in paired_files(ctx, layout.images, layout.annotations):
            _read_one(xml_path, image, ctx)
        return
    files = glob_files(ctx.raw_dir, layout.annotations, special_files=True)
    if not files:
        ctx.exclude(layout.annotations, "the VOC annotation glob matches no file")
    for xml_path in files:
        _read_one(xml_path, None, ctx, image_root=ctx.path(layout.image_root))


def _read_one(xml_path: Path, image: Path | None, ctx: LayoutContext, image_root: Path | None = None) -> None:
    """One XML file's boxes on `image` (paired by template; its size when the XML has no `<size>`), or, without it, on
    `<filename>` under `image_root`."""
    where = ctx.rel(xml_path)
    try:
        root = ET.fromstring(budget.read_annotation_bytes(xml_path))
        filename = root.findtext("filename").strip() if image is None else None
        try:
            width, height = int(root.findtext("size/width")), int(root.findtext("size/height"))
            size = (width, height) if width > 0 and height > 0 else None
        except (TypeError, ValueError):
            if image is None:
                raise
            size = None  # the paired image's header gives it below, so boxes are clipped as usual
    except budget.OverBudget as exc:
        ctx.exclude(where, str(exc))
        return
    except (OSError, ET.ParseError, AttributeError, TypeError, ValueError) as exc:
        ctx.exclude(where, f"not a VOC annotation{'' if image else ' with filename and size'} ({exc})")
        return
    path = image if image is not None else image_root / filename
    actual = image_size(path) if path.is_file() else None
    if size is not None and actual is not None and actual != size:
        # boxes drawn on a W x H picture cannot be placed on another: resized or turned after annotation, or the
        # XML of another file; clipping them to either size would move them without a word (TN5000 ships two)
        ctx.exclude(ctx.rel(path), f"its VOC file {where} gives the image size {size[0]} x {size[1]} but the image is "
                                   f"{actual[0]} x {actual[1]}, so its boxes cannot be placed")
        return
    size = actual or size
    regions = []
    for number, obj in enumerate(root.iter("object"), start=1):
        try:
            # <label> where older tools (the AIR lab's, read by its readdata.py) wrote no <name>
            name = (obj.findtext("name") or obj.findtext("label")).strip()
            bndbox = [float(obj.findtext(f"bndbox/{k}")) for k in ("xmin", "ymin", "xmax", "ymax")]
        except (AttributeError, TypeError, ValueError):
            ctx.exclude(f"{where}#object-{number}", "object without a name or a complete bndbox")
            continue
        # VOC pixels are 1-based and inclusive: xmin=1..xmax=W covers the whole row -> edges (0, W).
        box, problem = clip_box((bndbox[0] - 1, bndbox[1] - 1, bndbox[2], bndbox[3]), size)
        if box is None:
            ctx.exclude(f"{where}#object-{number}", problem or "invalid box")
            continue
        regions.append(Region(label=name, instance=f"object-{number}", box=box))
    ctx.add(path, regions=regions, size=size, grounded=True)
