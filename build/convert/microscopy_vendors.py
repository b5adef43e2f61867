"""Adapters from each vendor reader to `microscopy.VendorFile`: describe the series, read one channel plane.

Readers, chosen by maintenance and licence (docs/formats.md, "Vendor microscopy"):
* CZI — pylibCZIrw (Zeiss's own libCZI, LGPL-3.0): zoomed reads compose a scene from its pyramid
  subblocks at the output size, so a whole-slide scan never materialises at full resolution.
* LIF — liffile (BSD-3-Clause, the tifffile author's): memory-maps the uncompressed memory blocks.
* ND2 — nd2 (BSD-3-Clause): Nikon's format read without the Nikon SDK; frames are memory-mapped views.
* VSI — slideio (BSD-3-Clause, C++): reads cellSens `.vsi` + `_name_/stack*/*.ets` without Java and
  picks the pyramid level for the requested size itself.
The GPL readers (readlif, aicspylibczi) and the Java one (bioformats) are not used.
"""
from __future__ import annotations

import importlib.metadata
from pathlib import Path
from typing import Any

import numpy as np

from mmbu.build.convert import microscopy
from mmbu.build.convert.base import ConversionError, Converted, ConvertOptions, exception_summary as _cause
from mmbu.build.convert.microscopy import Channel, Series

# Leica LUT names -> display colours (a channel's LUT is its colour in LAS X)
LIF_LUT_COLOURS = {
    "red": (255, 0, 0), "green": (0, 255, 0), "blue": (0, 0, 255), "cyan": (0, 255, 255),
    "magenta": (255, 0, 255), "yellow": (255, 255, 0), "gray": (255, 255, 255), "grey": (255, 255, 255),
}
CZI_RGB_TYPES = ("Bgr24", "Bgr48", "Bgra32", "Bgr96Float")


def read_czi(path: Path, options: ConvertOptions) -> Converted:
    return microscopy.convert(Path(path), options, _CziFile)


def read_lif(path: Path, options: ConvertOptions) -> Converted:
    return microscopy.convert(Path(path), options, _LifFile)


def read_nd2(path: Path, options: ConvertOptions) -> Converted:
    return microscopy.convert(Path(path), options, _Nd2File)


def read_vsi(path: Path, options: ConvertOptions) -> Converted:
    return microscopy.convert(Path(path), options, _VsiFile)


def list_series(path: Path, format_name: str) -> list[Series]:
    """The series of a vendor file (names, sizes), headers only: what a layout needs for `series: each`."""
    opener = {"czi": _CziFile, "lif": _LifFile, "nd2": _Nd2File, "vsi": _VsiFile}[format_name]
    vendor = opener(Path(path))
    try:
        return list(vendor.series)
    finally:
        vendor.close()


def _version(package: str) -> str:
    try:
        return f"{package} {importlib.metadata.version(package)}"
    except importlib.metadata.PackageNotFoundError:
        return package


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [] if value is None else [value]


class _CziFile:
    format, scales_natively = "czi", True

    def __init__(self, path: Path) -> None:
        from pylibCZIrw import czi as pyczi

        self.path, self.reader = path, _version("pylibCZIrw")
        try:
            self._context = pyczi.open_czi(str(path))
            self.doc = self._context.__enter__()
            box, pixel_types, scenes = (self.doc.total_bounding_box, self.doc.pixel_types,
                                        self.doc.scenes_bounding_rectangle)
            metadata = self.doc.metadata.get("ImageDocument", {}).get("Metadata", {})
        except Exception as exc:  # libCZI raises RuntimeError/ValueError on damaged directories and headers
            raise ConversionError(f"{path} is not a readable CZI file ({_cause(exc)})") from None
        channels = self._channels(metadata, box)
        stack = {axis: hi - lo for axis, (lo, hi) in box.items() if axis not in ("C", "X", "Y", "M", "S")}
        pixel_type = pixel_types.get(0, next(iter(pixel_types.values()), "Gray8"))
        rgb = pixel_type in CZI_RGB_TYPES
        rectangles = scenes or {None: self.doc.total_bounding_rectangle}
        names = self._scene_names(metadata)
        self.series = [
            Series(index, names.get(scene, f"scene {scene}") if scene is not None else "image", rect.w, rect.h,
                   pixel_type, dict(stack), channels[:1] if rgb else channels, rgb,
                   extra={"scene": scene, "roi": (rect.x, rect.y, rect.w, rect.h)})
            for index, (scene, rect) in enumerate(sorted(rectangles.items(), key=lambda item: item[0] or 0))
        ]

    @staticmethod
    def _channels(metadata: dict[str, Any], box: dict[str, tuple[int, int]]) -> list[Channel]:
        shown = _as_list(metadata.get("DisplaySetting", {}).get("Channels", {}).get("Channel"))
        count = box.get("C", (0, 1))[1] - box.get("C", (0, 1))[0]
        channels = []
        for index in range(count):
            entry = shown[index] if index < len(shown) else {}
            colour = str(entry.get("Color", ""))  # '#AARRGGBB'
            rgb = tuple(int(colour[i:i + 2], 16) for i in (3, 5, 7)) if len(colour) == 9 else None
            channels.append(Channel(entry.get("@Name") or entry.get("Name"), rgb, "czi-display-setting"))
        return channels

    @staticmethod
    def _scene_names(metadata: dict[str, Any]) -> dict[int, str]:
        dimensions = metadata.get("Information", {}).get("Image", {}).get("Dimensions", {})
        scenes = _as_list(dimensions.get("S", {}).get("Scenes", {}).get("Scene"))
        return {index: scene["@Name"] for index, scene in enumerate(scenes) if isinstance(scene, dict)
                and scene.get("@Name")}

    def read_plane(self, series: Series, plane: dict[str, int], channel: int,
                   size: tuple[int, int] | None) -> np.ndarray:
        roi = series.extra["roi"]
        zoom = min(1.0, size[0] / roi[2]) if size else 1.0
        background = (255, 255, 255) if series.rgb else (0, 0, 0)
        try:
            data = self.doc.read(roi=roi, plane={"C": channel, **plane}, scene=series.extra["scene"], zoom=zoom,
                                 background_pixel=background)
        except Exception as exc:
            raise ConversionError(f"{self.path} has pixel data that cannot be decoded ({_cause(exc)})") from None
        if series.rgb:
            return np.ascontiguousarray(data[..., 2::-1])  # libCZI hands out BGR(A)
        return data[..., 0]

    def close(self) -> None:
        if hasattr(self, "_context"):
            self._context.__exit__(None, None, None)


class _LifFile:
    format, scales_natively = "lif", False

    def __init__(self, path: Path) -> None:
        import liffile

        self.path, self.reader = path, _version("liffile")
        try:
            self.lif = liffile.LifFile(path)
            images = list(self.lif.images)
        except Exception as exc:
            raise ConversionError(f"{path} is not a readable LIF file ({_cause(exc)})") from None
        self._arrays: dict[int, np.ndarray] = {}
        self._images = images
        self.series = [self._describe(index, image) for index, image in enumerate(images)]

    def _describe(self, index: int, image: Any) -> Series:
        dims, sizes = tuple(image.dims), dict(image.sizes)
        spatial = [axis for axis in dims if axis not in ("C", "S")]
        rows, columns = spatial[-2:] if len(spatial) >= 2 else (None, spatial[-1])
        colours = [LIF_LUT_COLOURS.get(str(c.get("LUTName", "")).lower()) for c in image.xml_element.iter(
            "ChannelDescription")]
        channels = [Channel(None, colour, "lif-lut") for colour in colours] or [Channel(None)]
        if "C" not in dims:
            channels = channels[:1]
        stack = {axis: sizes[axis] for axis in spatial[:-2]}
        return Series(index, getattr(image, "path", None) or image.name, sizes[columns], sizes[rows] if rows else 1,
                      str(image.dtype), stack, channels, rgb=sizes.get("S", 1) in (3, 4),
                      extra={"dims": dims, "plane_axes": (rows, columns)})

    def read_plane(self, series: Series, plane: dict[str, int], channel: int,
                   size: tuple[int, int] | None) -> np.ndarray:
        array = self._arrays.get(series.index)
        if array is None:
            image = self._images[series.index]
            try:
                array = image.asarray(out="memmap")  # the memory block mapped in place: nothing read yet
            except Exception:  # noqa: BLE001 - e.g. BGR data that must be reordered: read into memory
                array = image.asarray()
            self._arrays[series.index] = array
        key = tuple(channel if axis == "C" else slice(None) if axis in ("S", *series.extra["plane_axes"])
                    else plane[axis] for axis in series.extra["dims"])
        data = array[key]
        return data if series.extra["plane_axes"][0] else data[None]

    def close(self) -> None:
        self._arrays.clear()
        if hasattr(self, "lif"):
            self.lif.close()


class _Nd2File:
    format, scales_natively = "nd2", False

    def __init__(self, path: Path) -> None:
        import nd2

        self.path, self.reader = path, _version("nd2")
        try:
            self.file = nd2.ND2File(path)
            sizes = dict(self.file.sizes)
            metadata_channels = (self.file.metadata.channels or []) if self.file.metadata else []
            self._frames = {tuple(sorted(index.items())): number for number, index in enumerate(self.file.loop_indices)}
        except Exception as exc:
            raise ConversionError(f"{path} is not a readable ND2 file ({_cause(exc)})") from None
        channels = [Channel(meta.channel.name, (meta.channel.color.r, meta.channel.color.g, meta.channel.color.b)
                            if meta.channel.color else None, "nd2-channel-color") for meta in metadata_channels]
        channels = channels or [Channel(None)] * sizes.get("C", 1)
        stack = {axis: size for axis, size in sizes.items() if axis not in ("P", "C", "Y", "X", "S")}
        rgb = bool(self.file.is_rgb)
        self.series = [
            Series(position, f"position {position}", sizes["X"], sizes["Y"], str(self.file.dtype), dict(stack),
                   channels[:1] if rgb and len(channels) > 1 else channels, rgb,
                   pixel_size_um=(self.file.voxel_size().x, self.file.voxel_size().y))
            for position in range(sizes.get("P", 1))
        ]
        self._has_positions = "P" in sizes

    def read_plane(self, series: Series, plane: dict[str, int], channel: int,
                   size: tuple[int, int] | None) -> np.ndarray:
        wanted = {**plane, **({"P": series.index} if self._has_positions else {})}
        number = self._frames.get(tuple(sorted(wanted.items())), 0 if not wanted else None)
        if number is None:
            raise ConversionError(f"{self.path} has no frame at {wanted}")
        try:
            frame = self.file.read_frame(number)
        except Exception as exc:
            raise ConversionError(f"{self.path} has frame data that cannot be read ({_cause(exc)})") from None
        if series.rgb:
            return frame if frame.ndim == 3 else frame[channel]
        return frame if frame.ndim == 2 else frame[channel]

    def close(self) -> None:
        if hasattr(self, "file"):
            self.file.close()


class _VsiFile:
    format, scales_natively = "vsi", True

    def __init__(self, path: Path) -> None:
        import slideio

        self.path, self.reader = path, _version("slideio")
        try:
            self.slide = slideio.open_slide(str(path), "VSI")
            scenes = [self.slide.get_scene(index) for index in range(self.slide.num_scenes)]
        except Exception as exc:  # slideio raises RuntimeError with the driver's message
            raise ConversionError(f"{path} is not a readable VSI file with its .ets data ({_cause(exc)})") from None
        if not scenes:  # slideio opens a .vsi whose pixel folder is gone as a file with no scene
            folder = path.with_name(f"_{path.stem}_")
            missing = "is missing" if not folder.is_dir() else "holds no .ets image slideio can read"
            raise ConversionError(f"{path} is not a readable VSI file with its .ets data: its pixel folder "
                                  f"{folder.name}/ {missing}")
        self._scenes = scenes
        self.series = [self._describe(index, scene) for index, scene in enumerate(scenes)]

    @staticmethod
    def _describe(index: int, scene: Any) -> Series:
        names = [scene.get_channel_name(c) or None for c in range(scene.num_channels)]
        dtype = str(scene.get_channel_data_type(0))
        # brightfield scans are three unnamed 8-bit channels: colour samples, not dyes to blend
        rgb = scene.num_channels == 3 and dtype == "uint8" and not any(names)
        stack = {"Z": scene.num_z_slices, "T": scene.num_t_frames}
        x, y, width, height = scene.rect
        return Series(index, scene.name or f"scene {index}", width, height, dtype, stack,
                      [Channel(name, None, "vsi-name") for name in (names[:1] if rgb else names)], rgb,
                      extra={"rect": (x, y, width, height)})

    def read_plane(self, series: Series, plane: dict[str, int], channel: int,
                   size: tuple[int, int] | None) -> np.ndarray:
        scene = self._scenes[series.index]
        z, t = plane.get("Z", 0), plane.get("T", 0)
        channels = [0, 1, 2] if series.rgb else [channel]
        try:
            data = scene.read_block(rect=series.extra["rect"], size=size or (0, 0), channel_indices=channels,
                                    slices=(z, z + 1), frames=(t, t + 1))
        except Exception as exc:
            raise ConversionError(f"{self.path} has pixel data that cannot be decoded ({_cause(exc)})") from None
        return data if series.rgb else (data[..., 0] if data.ndim == 3 else data)

    def close(self) -> None:
        self._scenes = []
        self.slide = None
