"""DICOM whole-slide images listed file by file become one sample per series, not one per instance.

A DICOM whole-slide image (VL Whole Slide Microscopy Image Storage) is a series of instances sharing
a Series Instance UID: one file per pyramid level (Image Type value 3 `VOLUME`) plus `LABEL`,
`OVERVIEW` and `THUMBNAIL` images. Layouts enumerate files, so `LayoutContext.add` hands every listed
instance here instead of making it a sample; once the layout has listed everything, each series
becomes one sample (`SlideSeriesCollector.resolve`):

* The sample's image is the series' **base level** (the largest `VOLUME` instance, first by name on
  ties), which is also what `mmbu convert DIR` opens: openslide reads a DICOM slide from any one of its
  instances by scanning that file's folder for the rest of the series, so the converter needs no
  change. The sample id comes from the base level's path as for any file, so it is the same whichever
  instances a layout lists and in whatever order, and a one-file slide keeps the id it always had.
* Every instance of the series in that folder is a `companion` of the sample: the step cache
  re-converts when any of them changes.
* Label: any listed instance (a level, the label or the overview image) or the series' folder may
  carry it; all listings that carry one must agree. Per-sample metadata from a label table is
  merged in path order (the first value of a field wins). Regions and masks are in the base level's
  pixel frame, so only those given on the base level (or on the folder) are kept.
* Label, overview and thumbnail instances never become samples; a series without any pyramid level
  is reported.

A series that cannot be one slide is left out with one sentence naming the series and its files:
instances split over several folders (openslide reads one folder), listings that disagree on the
label, instances that disagree on the Study Instance UID, or a level that is not a uniform
downsample of the base level (openslide would accept it and draw a squashed picture). Instances
are recognised from their header only (the file meta's SOP Class UID, then a few tags; pixels are
never read); non-slide DICOM such as CT or MR slices never gets here.
"""
from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from mmbu.build.convert.sniff import slide_instance_header
from mmbu.build.layouts.files import relative
from mmbu.build.layouts.sample import Region

ASSOCIATED_IMAGE_TYPES = frozenset({"LABEL", "OVERVIEW", "THUMBNAIL"})
HEADER_TAGS = ["SeriesInstanceUID", "StudyInstanceUID", "ImageType", "TotalPixelMatrixColumns",
               "TotalPixelMatrixRows"]


@dataclass(frozen=True)
class SlideInstance:
    """The header facts of one instance of a DICOM whole-slide series."""

    path: Path
    series_uid: str
    study_uid: str
    image_type: str  # Image Type value 3: VOLUME, LABEL, OVERVIEW, THUMBNAIL ('' when absent)
    size: tuple[int, int]  # (columns, rows) of the total pixel matrix

    @property
    def is_level(self) -> bool:
        """A pyramid level (`VOLUME`, or an instance that does not say) rather than an associated image."""
        return self.image_type not in ASSOCIATED_IMAGE_TYPES


def read_slide_instance(path: Path) -> SlideInstance | None:
    """The instance's header facts when `path` is a Part-10 DICOM whole-slide instance, else None
    (also for a damaged header: the file stays an ordinary source and the converter names the damage)."""
    header = slide_instance_header(path, HEADER_TAGS) if path.is_file() else None
    if header is None or not header.get("SeriesInstanceUID"):
        return None
    image_type = header.get("ImageType") or []
    image_type = [image_type] if isinstance(image_type, str) else list(image_type)  # one value comes as a str
    try:
        size = (int(header.get("TotalPixelMatrixColumns", 0) or 0), int(header.get("TotalPixelMatrixRows", 0) or 0))
    except (TypeError, ValueError):
        return None
    return SlideInstance(
        path=path,
        series_uid=str(header.SeriesInstanceUID),
        study_uid=str(header.get("StudyInstanceUID", "")),
        image_type=str(image_type[2]).strip().upper() if len(image_type) > 2 else "",
        size=size,
    )


def is_uniform_downsample(base: tuple[int, int], level: tuple[int, int]) -> bool:
    """True when one downsample factor d gives the level from the base on both axes, within the one
    pixel that rounding each side may cost (so 97x65 -> 48x32 passes, 128x96 -> 64x24 does not)."""
    def factors(base_side: int, level_side: int) -> tuple[float, float]:
        return base_side / (level_side + 1), (base_side / (level_side - 1) if level_side > 1 else math.inf)

    (low_x, high_x), (low_y, high_y) = factors(base[0], level[0]), factors(base[1], level[1])
    return max(low_x, low_y) < min(high_x, high_y)


@dataclass(frozen=True)
class SlideListing:
    """What a layout said about one instance file (or the series' folder)."""

    path: Path
    label: str | None = None
    regions: tuple[Region, ...] = ()
    mask_path: Path | None = None
    row_metadata: dict[str, str] = field(default_factory=dict)
    grounded: bool = False

    @property
    def folder(self) -> Path:
        return self.path if self.path.is_dir() else self.path.parent


@dataclass(frozen=True)
class SeriesSample:
    """One whole-slide series resolved into what `LayoutContext` makes a sample from."""

    base: SlideInstance
    companions: tuple[Path, ...]  # every instance of the series in its folder, base level included
    label: str | None
    regions: tuple[Region, ...]
    mask_path: Path | None
    row_metadata: dict[str, str]
    grounded: bool


@dataclass(frozen=True)
class SeriesProblem:
    """An item of a series that is dropped, and the sentence saying why."""

    item: str
    reason: str


@dataclass
class SlideSeriesCollector:
    """Listed whole-slide instances, grouped by Series Instance UID until the layout is done."""

    raw_dir: Path
    _instances: dict[Path, SlideInstance | None] = field(default_factory=dict)
    _folders: dict[Path, dict[str, list[SlideInstance]]] = field(default_factory=dict)
    _listings: dict[str, list[SlideListing]] = field(default_factory=dict)

    def instance(self, path: Path) -> SlideInstance | None:
        if path not in self._instances:
            self._instances[path] = read_slide_instance(path)
        return self._instances[path]

    def series_in_folder(self, folder: Path) -> dict[str, list[SlideInstance]]:
        """Series UID -> its instances directly in `folder` (where openslide looks), sorted by name."""
        if folder not in self._folders:
            found: dict[str, list[SlideInstance]] = {}
            for path in sorted(folder.iterdir(), key=lambda p: p.name):
                instance = self.instance(path) if not path.name.startswith(".") else None
                if instance is not None:
                    found.setdefault(instance.series_uid, []).append(instance)
            self._folders[folder] = found
        return self._folders[folder]

    def claim(self, listing: SlideListing) -> bool:
        """Keep `listing` for its series when it names a slide instance, or a folder holding exactly
        one slide series; False leaves it to the ordinary one-file-one-sample path."""
        path = listing.path
        if path.is_dir():
            series = self.series_in_folder(path)
            if len(series) != 1:
                return False
            series_uid = next(iter(series))
        else:
            instance = self.instance(path)
            if instance is None:
                return False
            series_uid = instance.series_uid
        self._listings.setdefault(series_uid, []).append(listing)
        return True

    def resolve(self) -> tuple[list[SeriesSample], list[SeriesProblem]]:
        """One sample per listed series (in the order series were first listed) and what was dropped."""
        samples: list[SeriesSample] = []
        problems: list[SeriesProblem] = []
        for series_uid, listings in self._listings.items():
            sample = self._resolve_series(series_uid, listings, problems)
            if sample is not None:
                samples.append(sample)
        return samples, problems

    def _rel(self, path: Path) -> str:
        try:
            return relative(path, self.raw_dir)
        except ValueError:
            return str(path)

    def _resolve_series(self, series_uid: str, listings: list[SlideListing],
                        problems: list[SeriesProblem]) -> SeriesSample | None:
        listings = self._first_listings(listings, problems)
        by_folder = _grouped((self._rel(listing.folder), self._rel(listing.path)) for listing in listings)
        if len(by_folder) > 1:
            problems.append(SeriesProblem(", ".join(by_folder), (
                f"the instances of DICOM whole-slide series {series_uid} lie in {len(by_folder)} folders "
                f"({_listed(by_folder)}), but a slide is read from one folder; the series is left out")))
            return None
        folder = listings[0].folder
        # the series as openslide will see it; a listed hidden file is not in that folder scan
        instances = self.series_in_folder(folder).get(series_uid) or [
            instance for listing in listings if (instance := self.instance(listing.path)) is not None]
        item = self._rel(folder)
        reason = self._inconsistency(series_uid, instances, listings)
        if reason:
            problems.append(SeriesProblem(item, reason))
            return None
        levels = [instance for instance in instances if instance.is_level]
        if not levels:
            problems.append(SeriesProblem(item, (
                f"DICOM whole-slide series {series_uid} holds only label, overview or thumbnail images "
                f"({', '.join(self._rel(i.path) for i in instances)}), no pyramid level to convert")))
            return None
        largest = max(width * height for width, height in (level.size for level in levels))
        base = next(level for level in levels if level.size[0] * level.size[1] == largest)  # sorted by name
        for level in levels:
            if not is_uniform_downsample(base.size, level.size):
                problems.append(SeriesProblem(item, (
                    f"DICOM whole-slide series {series_uid} has a level {self._rel(level.path)} of "
                    f"{level.size[0]}x{level.size[1]} that is not a uniform downsample of its "
                    f"{base.size[0]}x{base.size[1]} base level {self._rel(base.path)}; the series is left out")))
                return None
        return self._merge(base, instances, listings, folder, problems)

    def _first_listings(self, listings: list[SlideListing], problems: list[SeriesProblem]) -> list[SlideListing]:
        """The listings in path order, each path once (a repeated row of a table is reported)."""
        kept: dict[Path, SlideListing] = {}
        for listing in listings:
            if listing.path in kept:
                problems.append(SeriesProblem(self._rel(listing.path),
                                              "the image is listed more than once; the first listing is kept"))
            else:
                kept[listing.path] = listing
        return [kept[path] for path in sorted(kept)]

    def _inconsistency(self, series_uid: str, instances: list[SlideInstance],
                       listings: list[SlideListing]) -> str | None:
        """The sentence for a series whose listings or instances disagree on what must be one value."""
        checks = (
            ("are given different labels",
             ((repr(listing.label), self._rel(listing.path)) for listing in listings if listing.label is not None)),
            ("disagree on the Study Instance UID",
             ((instance.study_uid, self._rel(instance.path)) for instance in instances if instance.study_uid)),
        )
        for what, pairs in checks:
            groups = _grouped(pairs)
            if len(groups) > 1:
                return (f"the instances of DICOM whole-slide series {series_uid} {what} ({_listed(groups)}), "
                        "but one slide is one sample; the series is left out")
        return None

    def _merge(self, base: SlideInstance, instances: list[SlideInstance], listings: list[SlideListing],
               folder: Path, problems: list[SeriesProblem]) -> SeriesSample:
        """The series' label, metadata and base-frame annotations gathered from all its listings."""
        framed = [listing for listing in listings if listing.path in (base.path, folder)]
        for listing in listings:
            if listing not in framed and (listing.regions or listing.mask_path):
                problems.append(SeriesProblem(self._rel(listing.path), (
                    f"the annotations given on {self._rel(listing.path)} are not used: regions of DICOM "
                    f"whole-slide series {base.series_uid} must be given on its base level "
                    f"{self._rel(base.path)}, the pixel frame the slide is converted from")))
        row_metadata: dict[str, str] = {}
        for listing in listings:
            for key, value in listing.row_metadata.items():
                row_metadata.setdefault(key, value)
        return SeriesSample(
            base=base,
            companions=tuple(instance.path for instance in instances),
            label=next((listing.label for listing in listings if listing.label is not None), None),
            regions=tuple(region for listing in framed for region in listing.regions),
            mask_path=next((listing.mask_path for listing in framed if listing.mask_path), None),
            row_metadata=row_metadata,
            grounded=any(listing.grounded for listing in listings),
        )


def _grouped(pairs: Iterable[tuple[str, str]]) -> dict[str, list[str]]:
    """value -> the items that have it, both in first-seen order."""
    groups: dict[str, list[str]] = {}
    for value, item in pairs:
        groups.setdefault(value, []).append(item)
    return groups


def _listed(groups: dict[str, list[str]]) -> str:
    return "; ".join(f"{value}: {', '.join(items)}" for value, items in groups.items())
