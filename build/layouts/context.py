"""The shared bookkeeping of every layout reader: ids, vocabulary checks and exclusions."""
from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import numpy as np

from mmbu.build.convert.base import non_utf8_name_error, regular_file_error
from mmbu.build.layouts.derived import DerivedFiles, DerivedImageError, source_identity
from mmbu.build.layouts.dicom_slides import SlideListing, SlideSeriesCollector
from mmbu.build.layouts.files import FileFacts, header_metadata, image_size, is_dicom, is_nifti, is_toolkit_file
from mmbu.build.layouts.sample import Region, Sample, make_sample_id
from mmbu.build.layouts.views import View, ViewError, views_for
from mmbu.core.confinement import ResolvedFolder, confine
from mmbu.core.exclusions import Exclusion
from mmbu.curation.manifest import DatasetManifest


class SampleSink(Protocol):
    """Where a layout's samples go as they are found: a list, or the build's `samples.jsonl` writer."""

    def append(self, sample: Sample) -> None: ...


@dataclass(frozen=True)
class SampleDraft:
    """What a layout says about one sample before `LayoutContext` admits it (the same for every view of a file).

    `grounded` says the sample exists for its regions, so losing all of them drops it; `size` is the stored
    frame's (width, height) when the reader knows it; `companions` are the other files of a whole the image is one
    file of (every instance of a DICOM whole-slide series); `provenance` says how a derived image was made."""

    label: str | None = None
    regions: tuple[Region, ...] = ()
    mask_path: Path | None = None
    row_metadata: dict[str, str] = field(default_factory=dict)
    size: tuple[int, int] | None = None
    grounded: bool = False
    provenance: dict[str, str] = field(default_factory=dict)
    companions: tuple[Path, ...] = ()


@dataclass
class LayoutContext:
    """Collects samples and exclusions while a layout walks a dataset; readers only describe what they saw."""

    manifest: DatasetManifest
    raw_dir: Path
    cache_dir: Path | None = None  # derived images and masks (see `derived`); beside raw_dir when not given
    # readers only append: the build passes a sink that writes each sample out, so none is held
    samples: SampleSink = field(default_factory=list)
    exclusions: list[Exclusion] = field(default_factory=list)
    _seen: set[str] = field(default_factory=set)
    _slides: SlideSeriesCollector = field(init=False)  # whole-slide instances wait here for their series

    def __post_init__(self) -> None:
        self._slides = SlideSeriesCollector(self.raw_dir)
        if self.cache_dir is None:
            self.cache_dir = self.raw_dir.with_name(f"{self.raw_dir.name}.layout-cache")
        self.derived = DerivedFiles(self.cache_dir)
        # every sample's path is checked against these: each folder is resolved once, not per file
        self._raw = ResolvedFolder(self.raw_dir)
        self._cache = ResolvedFolder(self.cache_dir)
        self._last_facts: tuple[Path, FileFacts] | None = None

    @property
    def dataset_id(self) -> str:
        return self.manifest.id

    @property
    def sample_count(self) -> int:
        """Samples added so far (each one's id is kept to refuse a second listing of it)."""
        return len(self._seen)

    def path(self, *parts: str) -> Path:
        """`raw_dir / parts`, or OutsideFolder when it resolves outside the dataset's folder (a `..` that
        slipped past validation, a symbolic link out): `read_samples` reports it in one sentence."""
        return confine(self.raw_dir, *parts, what=f"the {self.manifest.layout.kind} layout's path")

    def contains(self, path: Path) -> bool:
        """Whether `path` (a name an annotation file gives) lies inside the dataset's folder, links resolved."""
        return self._raw.inside(path)

    def files_under(self, folder: Path) -> list[Path]:
        """Every file below `folder` (sorted) that stays inside the dataset's folder after resolving links."""
        return [path for path in sorted(folder.rglob("*"))
                if path.is_file() and self._raw.inside(path) and not is_toolkit_file(Path(self._raw.relative(path)))]

    def rel(self, path: Path) -> str:
        """The path as the dataset names it: relative to raw_dir (as written, when a link leads outside)."""
        try:
            return self._raw.relative(path)
        except ValueError:
            try:
                return path.relative_to(self.raw_dir).as_posix()
            except ValueError:
                return str(path)

    def exclude(self, item: str, reason: str, sample_id: str | None = None) -> None:
        self.exclusions.append(Exclusion(dataset_id=self.dataset_id, sample_id=sample_id, item=item,
                                         stage="layout", reason=reason))

    def part_for(self, path: Path, dicom: bool | None = None) -> str | None:
        """Which part of this file the converter takes, by the manifest's frame or slice policy (part of the sample's
        id); `dicom` is `is_dicom(path)` when known."""
        spec = self.manifest.convert
        if is_nifti(path):
            return f"slice={spec.slice};axis={spec.axis}"
        if is_dicom(path) if dicom is None else dicom:
            return f"frame={spec.frame}"
        return None

    def facts(self, path: Path) -> FileFacts:
        """`FileFacts.of(path)`, kept for the path asked last: a reader that reads an image's size before it
        calls `add(image)` does not make `add` stat and sniff the file again."""
        if self._last_facts is None or self._last_facts[0] != path:
            self._last_facts = (path, FileFacts.of(path))
        return self._last_facts[1]

    def known_label(self, raw: str) -> bool:
        return self.manifest.label_spec(raw) is not None

    def add(self, image: Path, *, label: str | None = None, regions: Iterable[Region] = (),
            mask_path: Path | None = None, row_metadata: dict[str, str] | None = None,
            size: tuple[int, int] | None = None, grounded: bool = False,
            provenance: dict[str, str] | None = None, source: str | None = None, part: str | None = None,
            companions: tuple[Path, ...] = (), video_frame: int | None = None) -> Sample | None:
        """Record one sample; returns None (with an exclusion) when it cannot be used.

        A video or a multi-series microscopy file may give several samples (`views.views_for`, from the
        manifest's `convert:`); `video_frame` is the one frame a label table's row names.

        `grounded` says the sample exists for its regions, so losing all of them drops it. `source` and
        `part` name a sample that is one file of a larger whole (a DICOM series' chosen slice: the series
        folder and the slice policy make its id), `companions` the whole's other files. An instance
        of a DICOM whole-slide series (or the folder holding one series) also returns None: the series
        becomes one sample in `finish()`, once the layout has listed all of its files.
        """
        draft = SampleDraft(label=label, regions=tuple(regions), mask_path=mask_path, row_metadata=row_metadata or {},
                            size=size, grounded=grounded, provenance=provenance or {}, companions=companions)
        where = self.rel(image)
        if not self._raw.inside(image):
            # ids are built from the path inside the dataset; a path outside it is neither stable nor safe
            self.exclude(where, "the labels point outside the dataset's folder")
            return None
        if mask_path is not None and not (self._raw.inside(mask_path) or self._cache.inside(mask_path)):
            # assembled masks live in the layout cache
            self.exclude(where, "its mask points outside the dataset's folder")
            return None
        facts = self.facts(image)
        # only a folder or a DICOM file can be a whole-slide instance or series: the others skip the header read
        if (facts.is_dir or facts.dicom) and self._slides.claim(SlideListing(
                image, draft.label, draft.regions, draft.mask_path, draft.row_metadata, draft.grounded)):
            return None
        if facts.is_dir:
            self.exclude(where, f"the labels point to the folder {where}, and a folder is one sample only when "
                                 "it holds the instances of exactly one DICOM whole-slide series")
            return None
        return self._add_file(image, draft, source=source or where, part=part, video_frame=video_frame, facts=facts)

    def add_derived(self, source: Path, part: str, image: Callable[[], np.ndarray | bytes], *,
                    label: str | None = None, regions: Iterable[Region] = (), mask: np.ndarray | None = None,
                    row_metadata: dict[str, str] | None = None, grounded: bool = False,
                    provenance: dict[str, str] | None = None, sources: Iterable[Path] = ()) -> Sample | None:
        """Record a sample that is a part of `source` (an array slice, a table cell): `part` says which
        part (`key=train_images;index=12`) and with the source's path makes the stable sample id. `sources` are
        further files it is made from (the other channel files of a composed image): a change to any of them
        writes it again.

        `image()` returns the pixels (an array) or encoded image bytes; it is called only when the cached
        file is missing or stale. `mask` is the sample's label mask (its regions' `mask_value`s), stored
        beside it. Returns None (with an exclusion) when the sample cannot be used.
        """
        source_path = self.rel(source)
        sample_id = make_sample_id(self.dataset_id, source_path, part)
        draft = SampleDraft(label=label, regions=tuple(regions), row_metadata=row_metadata or {}, grounded=grounded,
                            provenance=provenance or {})
        kept = self._admit(draft, sample_id, f"{source_path}#{part}", source_path, part, listed="item")
        if kept is None:
            return None
        identity = source_identity(source, part=part)
        if sources:
            identity["with"] = [source_identity(path) for path in sources]
        try:
            image_path, notes = (self.derived.cached("images", sample_id, identity)
                                 or self.derived.write("images", sample_id, identity, image()))
            mask_path = None
            if mask is not None:
                mask_path, _ = (self.derived.cached("masks", sample_id, identity)
                                or self.derived.write("masks", sample_id, identity, mask, is_mask=True))
        except DerivedImageError as exc:
            self.exclude(f"{source_path}#{part}", str(exc), sample_id)
            return None
        height, width = (mask.shape[:2] if mask is not None else (None, None))
        size = (int(width), int(height)) if mask is not None else image_size(image_path)
        sample = Sample(
            sample_id=sample_id, dataset_id=self.dataset_id, source_path=source_path, image_path=image_path,
            part=part, label=label, regions=kept, mask_path=mask_path, image_size=size,
            row_metadata=draft.row_metadata, provenance={**draft.provenance, **notes},
        )
        self.samples.append(sample)
        self._seen.add(sample_id)
        return sample

    def store_mask(self, image: Path, mask: np.ndarray, sources: Iterable[Path]) -> Path:
        """Write the label mask assembled for the dataset file `image` (from per-object files, polygons,
        thresholded JPEG) into the layout cache, keyed by the sample id `add(image)` gives and by the
        identity of the annotation files it was made from; returns the path to pass as `mask_path`."""
        sample_id = make_sample_id(self.dataset_id, self.rel(image), self.part_for(image))
        identity = {"sources": [source_identity(p) for p in sources], "shape": list(mask.shape)}
        found = self.derived.cached("masks", sample_id, identity)
        return (found or self.derived.write("masks", sample_id, identity, mask, is_mask=True))[0]

    def list_unannotated_slide_instance(self, image: Path) -> bool:
        """Hand a DICOM whole-slide instance that has no annotation file of its own (a lower level, the
        label image) to its series, whose regions come from the base level, instead of excluding it.
        False for any other file, which the layout then reports as unannotated."""
        return self._slides.claim(SlideListing(image, grounded=True))

    def finish(self) -> None:
        """Make the whole-slide series listed so far into one sample each (see `dicom_slides`)."""
        series, problems = self._slides.resolve()
        for problem in problems:
            self.exclude(problem.item, problem.reason)
        for slide in series:
            draft = SampleDraft(label=slide.label, regions=slide.regions, mask_path=slide.mask_path,
                                row_metadata=slide.row_metadata, size=slide.base.size, grounded=slide.grounded,
                                companions=slide.companions)
            self._add_file(slide.base.path, draft, source=self.rel(slide.base.path))

    def _admit(self, draft: SampleDraft, sample_id: str, where: str, source_path: str, part: str | None, *,
               listed: str, missing: bool = False) -> tuple[Region, ...] | None:
        """The check every sample passes before it is kept: its id not seen before, its file present (`missing`
        says it is not), its label and its regions' labels in the manifest's vocabulary, and a grounded sample
        left with a region. Returns the regions kept, or None after recording why the sample is dropped (`where`
        names it; `listed` is what a second listing repeats: "image" or "item")."""
        if sample_id in self._seen:
            self.exclude(where, f"the {listed} is listed more than once; the first listing is kept", sample_id)
            return None
        if missing:
            self.exclude(where, f"the labels point to {where}, which is not in the fetched files", sample_id)
            return None
        if draft.label is not None and not self.known_label(draft.label):
            self.exclude(where, f"label {draft.label!r} is not in the manifest's label vocabulary", sample_id)
            return None
        kept: list[Region] = []
        for region in draft.regions:
            if self.known_label(region.label):
                kept.append(region)
            else:
                self.exclude(f"{source_path}#{region.instance}",
                             f"object label {region.label!r} is not in the manifest's label vocabulary",
                             make_sample_id(self.dataset_id, source_path, part, region.instance))
        if draft.grounded and not kept:
            self.exclude(where, "no annotated object with a known label is left in this image", sample_id)
            return None
        return tuple(kept)

    def _add_file(self, image: Path, draft: SampleDraft, *, source: str, part: str | None = None,
                  video_frame: int | None = None, facts: FileFacts | None = None) -> Sample | None:
        """One sample per view of the dataset file `image` (`source` names it in ids and reports; `facts` is
        `FileFacts.of(image)` when the caller has it)."""
        facts = facts or self.facts(image)
        if problem := non_utf8_name_error(source):  # its id and every report would have to name it
            self.exclude(source, problem)
            return None
        if not facts.is_file and (problem := regular_file_error(image)):  # a FIFO or device would block the build
            self.exclude(source, problem)
            return None
        try:
            views = (views_for(image, self.manifest.convert, video_frame) if facts.is_file and part is None
                     else [View(None)])
        except ViewError as exc:
            self.exclude(source, str(exc))
            return None
        added = None
        for view in views:
            view_part = part or (view.key if view.key is not None else self.part_for(image, facts.dicom))
            sample_id = make_sample_id(self.dataset_id, source, view_part)
            kept = self._admit(draft, sample_id, source, source, view_part, listed="image", missing=not facts.is_file)
            if kept is None:
                continue
            sample = Sample(
                sample_id=sample_id, dataset_id=self.dataset_id, source_path=source, image_path=image,
                part=view_part, label=draft.label, regions=kept, mask_path=draft.mask_path,
                image_size=draft.size or image_size(image, facts.dicom),
                file_metadata=header_metadata(image, facts.dicom), row_metadata=draft.row_metadata,
                companion_paths=draft.companions, provenance=draft.provenance, view=view.options,
            )
            self.samples.append(sample)
            self._seen.add(sample_id)
            added = sample
        return added
