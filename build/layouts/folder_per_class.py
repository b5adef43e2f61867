"""<root>/<label>/<image>: the class folder's name is the raw label (with optional levels above or
below it, e.g. split folders, described by the layout's `folders` template), or a part of each file's
name when the layout's `images` template names `{label}`."""
from __future__ import annotations

from pathlib import Path

from mmbu.build.layouts.context import LayoutContext
from mmbu.curation.manifest.hints import did_you_mean
from mmbu.curation.manifest.layout import FolderPerClassLayout
from mmbu.curation.manifest.templates import PathTemplate, is_hidden


def read(layout: FolderPerClassLayout, ctx: LayoutContext) -> None:
    root = ctx.path(layout.root)
    folders = _folders(root, layout.folder_template)
    if not folders:
        if layout.label_in_file_name:
            where = f"matching {layout.folder_template!r} under" if layout.folder_template else "at"
            ctx.exclude(layout.root, f"folder_per_class expects the folder of the images {where} {layout.root!r}; "
                                     "found none")
        else:
            where = "under" if layout.folder_template == "{label}" else f"matching {layout.folder_template!r} under"
            ctx.exclude(layout.root, f"folder_per_class expects one folder per class {where} {layout.root!r}; "
                                     "found none")
        return
    if layout.splits:
        found = sorted({parts["split"] for _, parts in folders})
        for split in layout.splits:
            if split not in found:
                ctx.exclude(layout.root, f"split {split!r} is not among the split folders{did_you_mean(split, found)}")
        folders = [(folder, parts) for folder, parts in folders if parts["split"] in layout.splits]
    names = PathTemplate(layout.images)
    for folder, parts in folders:
        if names.names:
            images = [(path, {**parts, **more}) for path, more in names.scan(folder)]
        else:
            images = [(p, parts) for p in sorted(folder.glob(layout.images))
                      if p.is_file() and not is_hidden(p.relative_to(folder))]
        if not images:
            what = f"class folder {parts['label']!r}" if "label" in parts else f"folder {ctx.rel(folder)!r}"
            ctx.exclude(ctx.rel(folder), f"{what} holds no file matching {layout.images!r}")
        for image, image_parts in images:
            ctx.add(image, label=image_parts["label"])


def _folders(root: Path, text: str) -> list[tuple[Path, dict[str, str]]]:
    """The folders below `root` that `text` describes, with their named parts (`root` itself for '')."""
    if not root.is_dir():
        return []
    if not text:
        return [(root, {})]
    template = PathTemplate(text)
    found = []
    for folder in sorted(root.glob(template.glob)):
        relative = folder.relative_to(root)
        parts = template.match(relative.as_posix())
        if folder.is_dir() and parts is not None and not is_hidden(relative):
            found.append((folder, parts))
    return found
