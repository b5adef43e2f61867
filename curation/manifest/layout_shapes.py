"""Shapes of files that several mask layouts share: one image file holding several panels (`Panels`), and one
sample composed from per-channel files (`ChannelFiles`)."""
from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from mmbu.curation.manifest.layout_base import parse_colour


class Panels(BaseModel):
    """One image file holding equal panels side by side (and/or stacked), the image in one and its mask in another.

    DeepLIIF stitches six 512 x 512 panels of one region into one PNG: the IHC input, four other stains or channels,
    then the segmentation mask (constantinpape/torch-em's deepliif.py: `np.split(image, 6, axis=1)`), so
    `{across: 6, image: 1, mask: 6}`. Panels are numbered from 1, left to right, then top to bottom.
    """

    model_config = ConfigDict(extra="forbid")

    across: int = Field(ge=1, description="Panels side by side (the file's width is split into this many).")
    down: int = Field(1, ge=1, description="Panels stacked (the file's height is split into this many).")
    image: int = Field(ge=1, description="The panel holding the image, numbered from 1 left to right, then down.")
    mask: int = Field(ge=1, description="The panel holding its mask (read with the layout's mask fields).")

    @model_validator(mode="after")
    def _panels_exist(self) -> "Panels":
        count = self.across * self.down
        for name in ("image", "mask"):
            if getattr(self, name) > count:
                raise ValueError(f"{name} panel {getattr(self, name)} does not exist: {self.across} across x "
                                 f"{self.down} down is {count} panels")
        if self.image == self.mask:
            raise ValueError(f"image and mask are both panel {self.image}")
        if count < 2:
            raise ValueError("panels split a file into at least two (across or down)")
        return self


class ChannelFiles(BaseModel):
    """One sample composed from several files, one per channel, that differ only in one named part of the image
    template: CELLULAR's `images/<field>_w1.TIF` (FITC), `_w2.TIF` (Texas Red), `_w3.TIF` (transmitted light).

    The channels are stacked in the order of `colors` into one multi-channel image, each named by its part value and
    shown in its colour: the converter blends them as it blends any fluorescence image (each channel scaled by its
    own percentile window). A sample missing one of its channel files is an exclusion.
    """

    model_config = ConfigDict(extra="forbid")

    part: str = Field(description="The named part of the image template that tells the channel files apart, e.g. "
                                  "`channel` in 'images/{field}_{channel}.TIF'.")
    colors: dict[str, str] = Field(min_length=2, description="Part value -> display colour ('#0000ff' or '0,0,255'), "
                                                            "one per channel file, in the order they are stacked.")

    @field_validator("colors")
    @classmethod
    def _colours(cls, value: dict[str, str]) -> dict[str, str]:
        for text in value.values():
            parse_colour(text)
        return value

    def rgb(self) -> list[tuple[int, int, int]]:
        return [parse_colour(text) for text in self.colors.values()]
