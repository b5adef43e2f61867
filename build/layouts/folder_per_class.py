"""<root>/<label>/<image>: the class folder's name is the raw label."""
from __future__ import annotations

from mmbu.build.layouts.context import LayoutContext
from mmbu.curation.manifest.layout import FolderPerClassLayout


def read(layout: FolderPerClassLayout, ctx: LayoutContext) -> None:
    root = ctx.path(layout.root)
    folders = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")) if root.is_dir() else []
    if not folders:
        ctx.exclude(layout.root, f"folder_per_class expects one folder per class under {layout.root!r}; found none")
        return
    for folder in folders:
        images = sorted(p for p in folder.glob(layout.images) if p.is_file() and not p.name.startswith("."))
        if not images:
            ctx.exclude(ctx.rel(folder), f"class folder {folder.name!r} holds no file matching {layout.images!r}")
        for image in images:
            ctx.add(image, label=folder.name)
