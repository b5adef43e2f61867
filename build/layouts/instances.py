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

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from mmbu.build.layouts.masks import value_boxes
from mmbu.build.layouts.sample import Region
from mmbu.core import budget


@dataclass
class InstanceCanvas:
    """An instance-id mask under construction, (height, width).

    Its size is checked against the budget (`mmbu.core.budget`: pixels and bytes of one plane) before it is
    allocated, and its objects against `max_instances` as they are painted; either is `budget.OverBudget` naming
    `name`. `paint_plane` paints a whole plane of ids in one pass over its pixels."""

    height: int
    width: int
    name: str = "the mask"
    ids: np.ndarray = field(init=False)
    _objects: list[tuple[str, str, int]] = field(default_factory=list)  # (label, instance key, pixels painted)
    _values: dict[tuple[str, str], int] = field(default_factory=dict)  # (label, instance key) -> id

    def __post_init__(self) -> None:
        budget.check_plane(self.name, self.width, self.height, sample_bytes=4, kind="instance mask")
        self.ids = np.zeros((self.height, self.width), np.int32)

    @property
    def shape(self) -> tuple[int, int]:
        return self.height, self.width

    def paint(self, where: np.ndarray, label: str, instance: str) -> None:
        """Add one object, or another part of an object already painted under the same `instance` key
        (LabelMe's `group_id`): `where` is its boolean (height, width) mask."""
        value = self._value(label, instance, int(where.sum()))
        self.ids[where] = value

    def paint_plane(self, plane: np.ndarray, background: int, describe: Callable[[int], tuple[str, str] | None]
                    ) -> None:
        """Add every object of a plane of ids at once, in ascending id order: `describe(id)` gives its (label,
        instance key), or None to leave it out. One pass over the pixels, whatever the number of ids."""
        found = [(value, size) for value, (_, size) in value_boxes(plane).items() if value != background]
        budget.check_instances(self.name, len(self._objects) + len(found))
        values, new_ids = [], []
        for value, size in found:
            described = describe(value)
            if described is not None:
                values.append(value)
                new_ids.append(self._value(*described, size))
        if not values:
            return
        where = np.isin(plane, values)
        positions = np.searchsorted(np.asarray(values), plane[where])  # `values` ascend: each pixel's object
        self.ids[where] = np.asarray(new_ids, np.int32)[positions]

    def _value(self, label: str, instance: str, pixels: int) -> int:
        """The id of (label, instance), added (within the budget) when new; `pixels` more are counted as painted."""
        value = self._values.get((label, instance))
        if value is None:
            budget.check_instances(self.name, len(self._objects) + 1)
            self._objects.append((label, instance, 0))
            value = self._values[(label, instance)] = len(self._objects)
        known_label, known, painted = self._objects[value - 1]
        self._objects[value - 1] = (known_label, known, painted + pixels)
        return value

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
