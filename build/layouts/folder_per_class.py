"""<root>/<label>/<image>: the class folder's name is the raw label (with optional levels above or
below it, e.g. split folders, described by the layout's `folders` template)."""
from __future__ import annotations

from mmbu.build.layouts.context import LayoutContext
from mmbu.curation.manifest.hints import did_you_mean
from mmbu.curation.manifest.layout import FolderPerClassLayout
from mmbu.curation.manifest.templates import PathTemplate, is_hidden


def read(layout: FolderPerClassLayout, ctx: LayoutContext) -> None:
    root = ctx.path(layout.root)
    template = PathTemplate(layout.folders)
    folders = []
    for folder in sorted(root.glob(template.glob)) if root.is_dir() else []:
        relative = folder.relative_to(root)
        parts = template.match(relative.as_posix())
        if folder.is_dir() and parts is not None and not is_hidden(relative):
            folders.append((folder, parts))
    if not folders:
        where = "under" if layout.folders == "{label}" else f"matching {layout.folders!r} under"
        ctx.exclude(layout.root, f"folder_per_class expects one folder per class {where} {layout.root!r}; found none")
        return
    if layout.splits:
        found = sorted({parts["split"] for _, parts in folders})
        for split in layout.splits:
            if split not in found:
                ctx.exclude(layout.root, f"split {split!r} is not among the split folders{did_you_mean(split, found)}")
        folders = [(folder, parts) for folder, parts in folders if parts["split"] in layout.splits]
    for folder, parts in folders:
        images = sorted(p for p in folder.glob(layout.images) if p.is_file() and not is_hidden(p.relative_to(folder)))
        if not images:
            ctx.exclude(ctx.rel(folder), f"class folder {parts['label']!r} holds no file matching {layout.images!r}")
        for image in images:
            ctx.add(image, label=parts["label"])
