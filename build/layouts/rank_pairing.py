"""Masks paired with images by rank when the two numberings differ (`mask_files` with `pair_by: rank`).

torch-em's loaders pair such datasets by position: `zip(natsorted(glob(images/*.png)), natsorted(glob(annotations/
*.png)))` for Arvidsson's nuclei, `T1DUAL/DICOM_anon/InPhase/*` with `T1DUAL/Ground/*` for CHAOS. Here the named parts
of the templates make the groups: the images that share all their named parts form one group, the masks that share
theirs another, and an image group takes the mask group whose parts agree with its own (so one mask group can serve
two image groups: CHAOS's in-phase and out-of-phase series share their ground truth). Inside a pair of groups the
n-th image in natural order (`img2` before `img10`, natsort's order, as the loaders sort) takes the n-th mask. Groups of
different sizes cannot be paired by rank: the whole group is reported in one sentence and none of it is guessed.
"""
from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from natsort import natsort_keygen

from mmbu.build.layouts.channel_files import ImageFiles
from mmbu.build.layouts.context import LayoutContext
from mmbu.curation.manifest.templates import PathTemplate

MaskFile = tuple[Path, dict[str, str]]


class RankPairs:
    """Each image's mask found by rank; `files` every mask file, `used` those of paired groups."""

    def __init__(self, ctx: LayoutContext, images: list[ImageFiles], image_template: PathTemplate,
                 mask_template: PathTemplate) -> None:
        natural = natsort_keygen()
        masks_by_group: dict[tuple[str, ...], list[MaskFile]] = defaultdict(list)
        for path, parts in mask_template.scan(ctx.raw_dir):
            masks_by_group[tuple(parts[n] for n in mask_template.names)].append((path, parts))
        self.files: set[Path] = {path for group in masks_by_group.values() for path, _ in group}
        self.used: set[Path] = set()
        self.reported: set[Path] = set()  # images of groups whose counts differ (reported once per group)
        self._mask_of: dict[Path, list[MaskFile]] = {}
        images_by_group: dict[tuple[str, ...], list[ImageFiles]] = defaultdict(list)
        for item in images:
            if item.first not in self.files:  # `*.png` over images and masks alike: a mask is never an image
                images_by_group[tuple(sorted(item.parts.items()))].append(item)
        for key, group in images_by_group.items():
            parts = dict(key)
            masks = sorted(masks_by_group.get(tuple(parts[n] for n in mask_template.names), []),
                           key=lambda mask: natural(ctx.rel(mask[0])))
            group.sort(key=lambda item: natural(ctx.rel(item.first)))
            self.used.update(path for path, _ in masks)
            if len(masks) != len(group):
                ctx.exclude(ctx.rel(group[0].first),
                            f"{len(group)} image(s) matching {image_template.text!r} ({_where(ctx, group[0].first)}) "
                            f"and {len(masks)} mask(s) matching {mask_template.text!r}"
                            + (f" ({_where(ctx, masks[0][0])})" if masks else "")
                            + " cannot be paired by rank: the counts differ, so none of this group is read")
                self.reported.update(item.first for item in group)
                continue
            for item, mask in zip(group, masks):
                self._mask_of[item.first] = [mask]

    def for_image(self, item: ImageFiles) -> list[MaskFile]:
        return self._mask_of.get(item.first, [])


def _where(ctx: LayoutContext, path: Path) -> str:
    return ctx.rel(path.parent) + "/"
