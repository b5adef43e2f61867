"""YOLO txt: `<class> <cx> <cy> <w> <h>` per line, a YOLO segmentation polygon `<class> <x1> <y1> <x2> <y2>
<x3> <y3> ...` (the box of its vertices) or a pose line (its box; `lines: pose`), normalised; paired with images by
relative stem, or by the named parts of two templates."""
from __future__ import annotations

from pathlib import Path

from mmbu.build.layouts.boxes import Box, clip_box, fractions_to_pixels, vertices_box, yolo_to_xyxy
from mmbu.build.layouts.context import LayoutContext
from mmbu.build.layouts.files import glob_files, image_size
from mmbu.build.layouts.pairing import paired_files
from mmbu.build.layouts.sample import Region
from mmbu.core.confinement import inside
from mmbu.curation.manifest.layout import YoloLayout


def _image_base(layout: YoloLayout) -> str:
    """The fixed folder part of the image glob (labels mirror the tree below it)."""
    parts = []
    for part in Path(layout.images).parts:
        if any(ch in part for ch in "*?["):
            break
        parts.append(part)
    return str(Path(*parts)) if parts else "."


LINE_FORMS = {
    "boxes": "'<class> <cx> <cy> <w> <h>'",
    "polygons": "a polygon '<class> <x1> <y1> <x2> <y2> <x3> <y3> ...'",
    "pose": "a pose line '<class> <cx> <cy> <w> <h> <keypoints> ...'",
    "auto": "'<class> <cx> <cy> <w> <h>' nor a polygon '<class> <x1> <y1> <x2> <y2> <x3> <y3> ...'",
}


def _line_box(values: list[float], size: tuple[int, int], lines: str = "auto") -> Box:
    """The pixel box of one label line's numbers, by the layout's `lines`: a centre box (four numbers), as Ultralytics
    writes instance segmentation labels a polygon of three or more normalised vertices, or a pose line's box (its
    keypoints, pairs or triples after the box, are not read); ValueError for any other count (a fifth number such as
    a detector's confidence is not a label)."""
    if lines == "pose":
        if len(values) < 6:
            raise ValueError(f"{len(values)} numbers")
        return yolo_to_xyxy(*values[:4], size)
    if len(values) == 4 and lines in ("auto", "boxes"):
        return yolo_to_xyxy(*values, size)
    if lines == "boxes" or len(values) < 6 or len(values) % 2:
        raise ValueError(f"{len(values)} numbers")
    return fractions_to_pixels(vertices_box(values), size)


def read(layout: YoloLayout, ctx: LayoutContext) -> None:
    if layout.labels_template():
        for label_file, image in paired_files(ctx, layout.images, layout.labels):
            _read_one(label_file, image, layout, ctx)
        return
    image_base = ctx.path(_image_base(layout))
    label_root = ctx.path(layout.labels)
    images = glob_files(ctx.raw_dir, layout.images)
    paired: set[Path] = set()
    for image in images:
        label_file = (label_root / image.relative_to(image_base)).with_suffix(".txt")
        paired.add(label_file.resolve())
        if label_file.is_file() and not inside(ctx.raw_dir, label_file):
            ctx.exclude(ctx.rel(image), f"its YOLO label file {ctx.rel(label_file)} links outside the dataset's folder")
            continue
        if not label_file.is_file():
            if ctx.list_unannotated_slide_instance(image):
                continue
            ctx.exclude(ctx.rel(image), f"no YOLO label file {ctx.rel(label_file)} for this image")
            continue
        _read_one(label_file, image, layout, ctx)
    for label_file in [f for f in ctx.files_under(label_root) if f.suffix == ".txt"] if label_root.is_dir() else []:
        if label_file.resolve() not in paired and label_file.name != "classes.txt":
            ctx.exclude(ctx.rel(label_file), "YOLO labels without a matching image")


def _read_one(label_file: Path, image: Path, layout: YoloLayout, ctx: LayoutContext) -> None:
    """The boxes of one label file's lines on its image."""
    size = image_size(image, ctx.facts(image).dicom)
    if size is None:
        ctx.exclude(ctx.rel(image), "the image size cannot be read, so normalised YOLO boxes cannot be placed")
        return
    try:
        lines = label_file.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        ctx.exclude(ctx.rel(label_file), f"the YOLO label file cannot be read as text ({exc})")
        return
    regions = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{ctx.rel(label_file)}:{number}"
        fields = line.split()
        try:
            index = int(fields[0])
            box = _line_box([float(v) for v in fields[1:]], size, layout.lines)
        except (ValueError, IndexError):
            ctx.exclude(where, f"line {line.strip()!r} is not {LINE_FORMS[layout.lines]}")
            continue
        if layout.class_names is not None and not 0 <= index < len(layout.class_names):
            ctx.exclude(where, f"class index {index} is outside class_names (0..{len(layout.class_names) - 1})")
            continue
        box, problem = clip_box(box, size)
        if box is None:
            ctx.exclude(where, problem or "invalid box")
            continue
        label = layout.class_names[index] if layout.class_names is not None else str(index)
        regions.append(Region(label=label, instance=f"line-{number}", box=box))
    ctx.add(image, regions=regions, size=size, grounded=True)
