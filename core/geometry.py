"""What a conversion did to the pixel grid: the typed record converters return and layouts consume.

A layout finds boxes and masks in the *stored* frame of a source (level 0 of a slide, the stored grid of a
DICOM/TIFF/raster file, the NIfTI slice as the converter shows it, before square pixels); the PNG is in the
*output* frame. `ConversionGeometry` says how one became the other, step by step, so that a box lands on
the same anatomy in the PNG:

    geometry = ConversionGeometry.kept((4096, 3072))                  # what was read
    geometry = geometry.then("level", (1024, 768))                    # a pyramid level
    geometry = geometry.then("resize", (512, 384), how="lanczos")     # fitted into max_size
    geometry.output_size == (512, 384); geometry.scale == (0.125, 0.125)

Every step names its input and output size, and the chain must join up (each step starts where the last
one ended), so a step a converter forgets to record shows up as a mismatch with the pixels it returns
(`mmbu.build.convert.dispatch.check_converted`), not as boxes in the wrong place. Sizes are
`(width, height)`, as everywhere in the conversion report. In a report line (docs/architecture.md §3.2) the geometry
is `params["geometry"]`, written by `to_json` and read back by `from_json`.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

Size = tuple[int, int]
"""(width, height) in pixels."""

TransformKind = Literal["level", "square_pixels", "resize", "orient"]
SCALING_KINDS = ("level", "square_pixels", "resize")  # steps that only stretch each axis
# An `orient` step's `how`: the Pillow `Image.Transpose` member applied (EXIF/TIFF orientation 2-8).
TRANSPOSES = ("FLIP_LEFT_RIGHT", "FLIP_TOP_BOTTOM", "ROTATE_90", "ROTATE_180", "ROTATE_270", "TRANSPOSE",
              "TRANSVERSE")
AXES_SWAPPED = ("ROTATE_90", "ROTATE_270", "TRANSPOSE", "TRANSVERSE")
# The TIFF/EXIF Orientation tag (274) -> the transpose that shows the image upright, as Pillow's
# `ImageOps.exif_transpose` applies it; 1 and unknown values need none.
ORIENTATION_TRANSPOSES = {2: "FLIP_LEFT_RIGHT", 3: "ROTATE_180", 4: "FLIP_TOP_BOTTOM", 5: "TRANSPOSE", 6: "ROTATE_270",
                          7: "TRANSVERSE", 8: "ROTATE_90"}


def _size(value: Any) -> Size:
    width, height = (int(v) for v in value)
    if width < 1 or height < 1:
        raise ValueError(f"a size must be at least 1 x 1 pixels, got {width} x {height}")
    return width, height


@dataclass(frozen=True)
class Transform:
    """One geometric step, in the order the converter applied it.

    kind: `level` (a pyramid level read instead of level 0), `square_pixels` (non-square pixels
        resampled to square ones), `resize` (fitted into max_size, or a thumbnail), `orient` (a flip or
        rotation: the TIFF/EXIF orientation tag applied).
    how: for `orient`, the Pillow transpose applied (one of TRANSPOSES); for the others, optionally the
        resampling filter ("lanczos", "nearest", ...).
    """

    kind: TransformKind
    from_size: Size
    to_size: Size
    how: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "from_size", _size(self.from_size))
        object.__setattr__(self, "to_size", _size(self.to_size))
        if self.kind == "orient":
            if self.how not in TRANSPOSES:
                raise ValueError(f"an orient step needs one of {', '.join(TRANSPOSES)} as `how`, got {self.how!r}")
            width, height = self.from_size
            expected = (height, width) if self.how in AXES_SWAPPED else (width, height)
            if self.to_size != expected:
                raise ValueError(f"{self.how} turns {width} x {height} into {expected[0]} x {expected[1]}, "
                                 f"not {self.to_size[0]} x {self.to_size[1]}")
        elif self.kind not in SCALING_KINDS:
            raise ValueError(f"unknown transform kind {self.kind!r}")


@dataclass(frozen=True)
class ConversionGeometry:
    """From the stored frame (`stored_size`) through `transforms` to the PNG (`output_size`)."""

    stored_size: Size
    output_size: Size
    transforms: tuple[Transform, ...] = field(default=())

    def __post_init__(self) -> None:
        object.__setattr__(self, "stored_size", _size(self.stored_size))
        object.__setattr__(self, "output_size", _size(self.output_size))
        object.__setattr__(self, "transforms", tuple(self.transforms))
        at = self.stored_size
        for step in self.transforms:
            if step.from_size != at:
                raise ValueError(f"the {step.kind} step starts at {step.from_size[0]} x {step.from_size[1]} but the "
                                 f"image was {at[0]} x {at[1]} by then: a step is missing or out of order")
            at = step.to_size
        if at != self.output_size:
            raise ValueError(f"the steps end at {at[0]} x {at[1]}, not at the output size "
                             f"{self.output_size[0]} x {self.output_size[1]}: a step is missing")

    @classmethod
    def kept(cls, size: Size) -> ConversionGeometry:
        """Nothing done yet: the output is the stored frame."""
        return cls(size, size)

    @classmethod
    def scaled(cls, stored_size: Size, output_size: Size, how: str | None = None) -> ConversionGeometry:
        """One resize from `stored_size` to `output_size` (none when they are equal)."""
        stored_size, output_size = _size(stored_size), _size(output_size)
        steps = () if stored_size == output_size else (Transform("resize", stored_size, output_size, how),)
        return cls(stored_size, output_size, steps)

    def then(self, kind: TransformKind, to_size: Size, how: str | None = None) -> ConversionGeometry:
        """This geometry followed by one more step from the current output size to `to_size`; a scaling
        step that changes nothing is not recorded."""
        to_size = _size(to_size)
        if kind in SCALING_KINDS and to_size == self.output_size:
            return self
        return ConversionGeometry(self.stored_size, to_size,
                                  (*self.transforms, Transform(kind, self.output_size, to_size, how)))

    @property
    def oriented(self) -> bool:
        """Whether a flip or rotation is among the steps (boxes then move, not only stretch)."""
        return any(step.kind == "orient" for step in self.transforms)

    @property
    def scale(self) -> tuple[float, float]:
        """Output pixels per stored pixel along x and y (for geometries without an `orient` step)."""
        if self.oriented:
            raise ValueError("a geometry with a flip or rotation has no per-axis scale; map boxes through its steps")
        return (self.output_size[0] / self.stored_size[0], self.output_size[1] / self.stored_size[1])

    def to_json(self) -> dict[str, Any]:
        return {
            "stored_size": list(self.stored_size),
            "output_size": list(self.output_size),
            "transforms": [{"kind": t.kind, "from_size": list(t.from_size), "to_size": list(t.to_size), "how": t.how}
                           for t in self.transforms],
        }

    @classmethod
    def from_json(cls, document: dict[str, Any]) -> ConversionGeometry:
        """The geometry `to_json` wrote; ValueError/KeyError/TypeError when it is not one."""
        steps = tuple(Transform(t["kind"], t["from_size"], t["to_size"], t.get("how"))
                      for t in document.get("transforms") or ())
        return cls(document["stored_size"], document["output_size"], steps)
