"""Objects given one by one (a mask file per nucleus, a channel of instance ids per class, a polygon)
gathered into one instance-id label mask, which is what the release's mask rows are cut from.

Each object gets the next id (1, 2, ...) in the order the source lists it; its `Region` has that id as
`mask_value`, its raw label, a stable `instance` key from the source (file name, channel and id,
annotation id) and the pixel-edge box of its pixels in the finished mask. Where two objects overlap,
the later one keeps the shared pixels (painter's order, as the field's loaders do when they flatten
such annotations, e.g. torch-em's MoNuSeg and PanNuke converters); an object left with fewer than
`min_pixels` pixels is reported, never silently kept as a speck.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from mmbu.build.layouts.sample import Region


@dataclass
class InstanceCanvas:
    """An instance-id mask under construction, (height, width)."""

    height: int
    width: int
    ids: np.ndarray = field(init=False)
    _objects: list[tuple[str, str, int]] = field(default_factory=list)  # (label, instance key, pixels painted)

    def __post_init__(self) -> None:
        self.ids = np.zeros((self.height, self.width), np.int32)

    @property
    def shape(self) -> tuple[int, int]:
        return self.height, self.width

    def paint(self, where: np.ndarray, label: str, instance: str) -> None:
        """Add one object, or another part of an object already painted under the same `instance` key
        (LabelMe's `group_id`): `where` is its boolean (height, width) mask."""
        for value, (known_label, known, painted) in enumerate(self._objects, start=1):
            if known == instance and known_label == label:
                self._objects[value - 1] = (label, instance, painted + int(where.sum()))
                self.ids[where] = value
                return
        self._objects.append((label, instance, int(where.sum())))
        self.ids[where] = len(self._objects)

    def regions(self, min_pixels: int = 1) -> tuple[list[Region], list[tuple[str, str]]]:
        """The objects as regions, and (instance, reason) for each one that is empty or was painted over."""
        from scipy import ndimage  # here: a no-op rebuild never loads scipy
        count = len(self._objects)
        found = ndimage.find_objects(self.ids, max_label=count) if count else []
        sizes = np.bincount(self.ids.ravel(), minlength=count + 1)
        regions: list[Region] = []
        problems: list[tuple[str, str]] = []
        for value, (label, instance, painted) in enumerate(self._objects, start=1):
            left = int(sizes[value])
            if painted == 0:
                problems.append((instance, "the object's mask is empty"))
            elif left < min_pixels:
                problems.append((instance, f"the object keeps {left} of its {painted} pixels after later objects "
                                           f"overlapping it (fewer than {min_pixels})"))
            else:
                rows, cols = found[value - 1]
                regions.append(Region(label=label, instance=instance, mask_value=value,
                                      box=(float(cols.start), float(rows.start), float(cols.stop), float(rows.stop))))
        return regions, problems
