"""One image file holding equal panels, the image in one and its mask in another (DeepLIIF's six 512 x 512 panels of
one region: five stains or channels, then the colour-coded mask).

The image panel is cut out and written losslessly into the layout cache, with the label mask read from the mask
panel (`mask_values`, `mask_colors` or `object_colors`, as for a separate mask file); the sample's id is the file plus
`panel=<n>`. A JPEG file's mask panel is lossy: class colours snap to the nearest declared colour, grey values to the
nearest `mask_values`, and thin structures left by the ringing are removed, as for separate JPEG masks.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from mmbu.build.layouts.colour_masks import colour_objects, colour_values
from mmbu.build.layouts.context import LayoutContext
from mmbu.build.layouts.files import glob_files
from mmbu.build.layouts.masks import MaskError, MaskRules, regions_from_mask, snap_lossy_values
from mmbu.curation.manifest.layout import ImageMaskPairsLayout
from mmbu.curation.manifest.layout_base import parse_colour
from mmbu.curation.manifest.layout_shapes import Panels


def read(layout: ImageMaskPairsLayout, ctx: LayoutContext) -> None:
    panels = layout.panels
    assert panels is not None  # the caller dispatches on it
    files = glob_files(ctx.raw_dir, layout.images)
    if not files:
        ctx.exclude(layout.images, f"no file matches images {layout.images!r}")
    for path in files:
        try:
            pixels, lossy = read_pixels(path)
            image, mask_panel = cut(pixels, panels, path.name)
            mask, note = panel_labels(layout, mask_panel, lossy, path.name)
        except MaskError as exc:
            ctx.exclude(ctx.rel(path), str(exc))
            continue
        regions = regions_from_mask(mask, MaskRules.of(layout))
        provenance = {"panels": f"image panel {panels.image}, mask panel {panels.mask} of {panels.across} across x "
                                f"{panels.down} down"}
        if note:
            provenance["mask"] = note
        ctx.add_derived(path, f"panel={panels.image}", lambda image=image: image, regions=regions, mask=mask,
                        grounded=True, provenance=provenance)


def read_pixels(path: Path) -> tuple[np.ndarray, bool]:
    """Every pixel of a raster file as stored (TIFF through tifffile, the rest through Pillow) and whether its
    format is lossy (JPEG)."""
    try:
        if path.suffix.lower() in (".tif", ".tiff"):
            import tifffile

            return np.asarray(tifffile.imread(path, key=0)), False
        from PIL import Image

        with Image.open(path) as image:
            lossy = image.format == "JPEG"
            if image.mode == "P":  # the palette's colours are what a reader sees
                image = image.convert("RGBA" if "transparency" in image.info else "RGB")
            return np.asarray(image), lossy
    except Exception as exc:  # noqa: BLE001 - every reader raises its own types; the sentence names the file
        raise MaskError(f"{path.name} cannot be read ({exc})") from None


def cut(pixels: np.ndarray, panels: Panels, name: str) -> tuple[np.ndarray, np.ndarray]:
    """(image panel, mask panel) of a file's pixels; MaskError when they do not split into equal panels."""
    height, width = pixels.shape[:2]
    if width % panels.across or height % panels.down:
        raise MaskError(f"{name} is {width}x{height} pixels, which does not split into {panels.across} x "
                        f"{panels.down} equal panels")
    panel_width, panel_height = width // panels.across, height // panels.down

    def panel(number: int) -> np.ndarray:
        row, column = divmod(number - 1, panels.across)
        return pixels[row * panel_height:(row + 1) * panel_height, column * panel_width:(column + 1) * panel_width]

    return np.ascontiguousarray(panel(panels.image)), panel(panels.mask)


def panel_labels(layout: ImageMaskPairsLayout, panel: np.ndarray, lossy: bool, name: str
                 ) -> tuple[np.ndarray, str | None]:
    """The label mask of a mask panel, and a note on how colours or lossy values became labels."""
    background = parse_colour(layout.background_color)
    if layout.object_colors or layout.mask_colors:
        rgb = _rgb(panel)
        if layout.object_colors:
            return colour_objects(rgb, background, lossy=lossy, name=name)
        return colour_values(rgb, list(layout.colours), background, lossy=lossy,
                             other_is_background=layout.other_colors == "background")
    if panel.ndim == 3:
        if not all(np.array_equal(panel[..., 0], panel[..., c]) for c in range(1, min(panel.shape[-1], 3))) \
                and not lossy:
            raise MaskError(f"{name}: the mask panel is in colour; name its colours with mask_colors (or "
                            "object_colors when they only tell objects apart)")
        panel = panel[..., :3].mean(axis=-1).round().astype(np.int64) if lossy else panel[..., 0]
    if not lossy:
        return panel, None
    if layout.instances == "ids" or not layout.mask_values:
        raise MaskError(f"{name} is a JPEG file, so its mask panel's values are blurred: give mask_values to snap "
                        "them to (instance ids cannot be recovered)")
    return snap_lossy_values(panel, layout.background, list(layout.mask_values))


def _rgb(panel: np.ndarray) -> np.ndarray:
    if panel.ndim == 2:
        return np.repeat(panel[..., None], 3, axis=-1).astype(np.uint8)
    return panel[..., :3].astype(np.uint8)
