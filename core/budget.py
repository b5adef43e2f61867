"""What one image, volume, array, table cell, canvas, mask, annotation file or video may cost, checked from what
its header declares before anything is allocated.

A 150-byte header can declare 10^9 slices, a sparse file 50000² voxels, a 30 KB zstd page a 1 GiB cell: every
reader asks here first, and an item over the budget is one sentence naming the file and the declared size (an
exclusion or a conversion error; the rest of the batch goes on). The limits are data (`Budget`), with these
defaults:

    max_pixels       89,478,485  pixels of one 2-D plane decoded or allocated at once: an image, a volume's slice, an
                                 MRC section, a video frame, an array item, a LabelMe/CVAT canvas, a mask. It is
                                 Pillow's own `Image.MAX_IMAGE_PIXELS` (where Pillow warns; it refuses at twice
                                 that, and that guard stays on as a second line)
    max_bytes        512 MiB     bytes of one decoded plane, array item or whole array, table cell (or the row group
                                 holding it), or annotation file
    max_slices       100,000     slices, sections or volumes a stack declares, frames listed from one video
    max_instances    10,000      objects (instance ids, components, polygons) in one image: each becomes a
                                 mask row whose ROI costs the image's pixels, so this bounds instances × pixels
    max_json_values  20,000,000  values (numbers, strings, lists...) one annotation JSON may hold (COCO, LabelMe,
                                 GeoJSON): ~32 bytes each once parsed

The budget in force is `current()`: the defaults, raised or lowered by the environment (`MMBU_MAX_PIXELS`,
`MMBU_MAX_BYTES`, ... : the field name upper-cased with `MMBU_`), and lowered (never raised) for one dataset by
its manifest's `budget:` (`limited`). `OverBudget` is a ValueError whose message is the one sentence.
"""
from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, fields, replace
from functools import lru_cache
from pathlib import Path
from typing import BinaryIO

from mmbu.core.bounded_read import NotRegularFile, open_regular
from mmbu.core.text import printable_path

PILLOW_MAX_IMAGE_PIXELS = 89_478_485  # PIL.Image.MAX_IMAGE_PIXELS as Pillow ships it (tests check it still is)


@dataclass(frozen=True)
class Budget:
    """The limits one item may cost (see the module docstring); a manifest's `budget:` may lower any of them."""

    max_pixels: int = field(default=PILLOW_MAX_IMAGE_PIXELS, metadata={"description": (
        "Pixels of one 2-D plane decoded or allocated at once (image, slice, section, frame, array item, canvas, "
        "mask); the default is Pillow's MAX_IMAGE_PIXELS.")})
    max_bytes: int = field(default=512 * 1024**2, metadata={"description": (
        "Bytes of one decoded plane, array item or whole array, table cell or row group, or annotation file.")})
    max_slices: int = field(default=100_000, metadata={"description": (
        "Slices, sections or volumes one stack declares; frames listed from one video.")})
    max_instances: int = field(default=10_000, metadata={"description": (
        "Objects (instances, components, shapes) in one image.")})
    max_json_values: int = field(default=20_000_000, metadata={"description": (
        "Values one annotation JSON file may hold.")})

    def lowered(self, lower: Mapping[str, int | None] | None) -> "Budget":
        """This budget with each limit `lower` sets taken where it is smaller (never raised)."""
        if not lower:
            return self
        return replace(self, **{k: min(int(v), getattr(self, k)) for k, v in lower.items() if v is not None})


SETTINGS = {item.name: f"MMBU_{item.name.upper()}" for item in fields(Budget)}
"""Each limit's environment variable (`max_pixels` -> `MMBU_MAX_PIXELS`)."""

_CURRENT: ContextVar[Budget | None] = ContextVar("mmbu_budget", default=None)


class OverBudget(ValueError):
    """An item declares more than the budget allows; the message is one sentence naming it and the setting."""


def from_environment(environ: Mapping[str, str] | None = None) -> Budget:
    """The defaults with the `MMBU_MAX_*` variables set in `environ` (os.environ); ValueError naming a bad one."""
    environ = os.environ if environ is None else environ
    return _from_settings(tuple(environ.get(variable, "") for variable in SETTINGS.values()))


@lru_cache(maxsize=8)
def _from_settings(settings: tuple[str, ...]) -> Budget:
    environ = dict(zip(SETTINGS.values(), settings))
    values: dict[str, int] = {}
    for name, variable in SETTINGS.items():
        text = environ.get(variable, "").strip().replace("_", "")
        if not text:
            continue
        try:
            number = int(text)
        except ValueError:
            number = None
        if number is None or number < 1:
            raise ValueError(f"{variable}={environ[variable]!r} is not a positive whole number")
        values[name] = number
    return Budget(**values)


def current() -> Budget:
    """The budget in force: the one `limited` set for this dataset, else the environment's."""
    return _CURRENT.get() or from_environment()


@contextmanager
def limited(lower: Mapping[str, int | None] | None) -> Iterator[Budget]:
    """Within the block, `current()` is the environment's budget lowered by `lower` (a manifest's `budget:`)."""
    token = _CURRENT.set(current().lowered(lower))
    try:
        yield _CURRENT.get()
    finally:
        _CURRENT.reset(token)


def _name(what: str | Path) -> str:
    return printable_path(what)


def _over(what: str | Path, declares: str, limit: int, unit: str, setting: str,
          outcome: str = "it is refused before it is read") -> OverBudget:
    return OverBudget(f"{_name(what)} declares {declares}, more than the {limit:,} {unit} "
                      f"({SETTINGS[setting]}); {outcome}")


def check_plane(what: str | Path, width: int, height: int, *, channels: int = 1, sample_bytes: int = 1,
                kind: str = "image") -> None:
    """Refuse a 2-D plane (image, slice, section, frame, canvas, mask) of `width` × `height` pixels of `channels`
    samples of `sample_bytes` each when it is over `max_pixels` or `max_bytes`."""
    budget = current()
    width, height = int(width), int(height)
    pixels = width * height
    if pixels > budget.max_pixels:
        raise _over(what, f"{_a(kind)} of {width:,} × {height:,} pixels ({pixels:,})", budget.max_pixels,
                    "pixels one plane may have", "max_pixels")
    check_bytes(what, pixels * max(1, int(channels)) * max(1, int(sample_bytes)),
                f"{_a(kind)} of {width:,} × {height:,} pixels")


def check_bytes(what: str | Path, count: int, thing: str = "data") -> None:
    """Refuse `count` bytes of one item (a decoded array, a cell, a file read whole) over `max_bytes`."""
    budget = current()
    if int(count) > budget.max_bytes:
        raise _over(what, f"{thing}: {_size(int(count))} ({int(count):,} bytes)", budget.max_bytes,
                    "bytes one item may cost", "max_bytes")


def check_slices(what: str | Path, count: int, kind: str = "slices") -> None:
    """Refuse a stack (volume, image stack, frames listed from a video) of more than `max_slices`."""
    budget = current()
    if int(count) > budget.max_slices:
        raise _over(what, f"{int(count):,} {kind}", budget.max_slices, f"{kind} one stack may have", "max_slices")


def planes_within(plane_bytes: int, at_most: int) -> int:
    """How many planes of `plane_bytes` one read may take (at least one, at most `at_most`) within `max_bytes`:
    the slab a scan for the largest mask area reads at a time."""
    return max(1, min(int(at_most), current().max_bytes // max(1, int(plane_bytes))))


def check_instances(what: str | Path, count: int) -> None:
    """Refuse an image with more than `max_instances` objects (each one's mask row costs the image's pixels)."""
    budget = current()
    if int(count) > budget.max_instances:
        raise _over(what, f"{int(count):,} objects", budget.max_instances, "objects one image may have",
                    "max_instances", "its objects are not listed")


@contextmanager
def _annotation_file(path: Path) -> Iterator[BinaryIO]:
    """`path` open for reading once it is a regular file within `max_bytes`. A FIFO, socket or device is refused
    before anything waits on it (a FIFO without a writer blocks a plain open for ever, /dev/zero never ends):
    OverBudget, since reading it could cost without bound."""
    try:
        handle = open_regular(path, "it is not read (a FIFO, socket or device could block or never end)")
    except NotRegularFile as exc:
        raise OverBudget(str(exc)) from None
    with handle:
        check_bytes(path, os.fstat(handle.fileno()).st_size, "an annotation file")
        yield handle


def read_annotation_bytes(path: str | Path) -> bytes:
    """The bytes of an annotation file (VOC, Aperio or CVAT XML...), read only when it is a regular file within
    `max_bytes`; OverBudget otherwise, OSError when it cannot be opened."""
    with _annotation_file(Path(path)) as handle:
        return handle.read()


def read_json_bytes(path: str | Path) -> bytes:
    """The bytes of a JSON annotation file, read only after its size (`max_bytes`) and the values it may hold
    (`max_json_values`) are within the budget (and only from a regular file: see `read_annotation_bytes`).

    Every value but the first of a list or object follows a comma, and every first one an opening bracket, so
    commas plus brackets (counted at C speed a MiB at a time, strings included) bound the values from above: a
    120 MB COCO file of 60 M numbers is refused without materialising them (~2 GiB as Python objects)."""
    path = Path(path)
    with _annotation_file(path) as handle:
        bound = 1
        for block in iter(lambda: handle.read(1 << 20), b""):
            bound += _json_value_bound(block) - 1
        _check_json_values(path, bound)
        handle.seek(0)
        return handle.read()


def _json_value_bound(data: bytes) -> int:
    return data.count(b",") + data.count(b"[") + data.count(b"{") + 1


def _check_json_values(what: str | Path, bound: int) -> None:
    limit = current().max_json_values
    if bound > limit:
        raise _over(what, f"up to {bound:,} JSON values", limit, "values one annotation file may hold",
                    "max_json_values")


def _a(noun: str) -> str:
    return f"{'an' if noun[:1].lower() in 'aeiou' else 'a'} {noun}"


def _size(count: int) -> str:
    for unit, scale in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if count >= scale:
            return f"{count / scale:,.1f} {unit}"
    return f"{count} bytes"
