"""The shared bookkeeping of every layout reader: ids, vocabulary checks and exclusions."""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from mmbu.build.layouts.files import header_metadata, image_size, is_dicom, is_nifti, relative
from mmbu.build.layouts.sample import Exclusion, Region, Sample, make_sample_id
from mmbu.curation.manifest import DatasetManifest


@dataclass
class LayoutContext:
    """Collects samples and exclusions while a layout walks a dataset; readers only describe what they saw."""

    manifest: DatasetManifest
    raw_dir: Path
    samples: list[Sample] = field(default_factory=list)
    exclusions: list[Exclusion] = field(default_factory=list)
    _seen: set[str] = field(default_factory=set)

    @property
    def dataset_id(self) -> str:
        return self.manifest.id

    def path(self, *parts: str) -> Path:
        return self.raw_dir.joinpath(*parts)

    def rel(self, path: Path) -> str:
        try:
            return relative(path, self.raw_dir)
        except ValueError:
            return str(path)

    def exclude(self, item: str, reason: str, sample_id: str | None = None) -> None:
        self.exclusions.append(Exclusion(dataset_id=self.dataset_id, sample_id=sample_id, item=item,
                                         stage="layout", reason=reason))

    def frame_for(self, path: Path) -> str | None:
        """The frame/slice policy the converter applies to this file (part of its sample id)."""
        spec = self.manifest.convert
        if is_nifti(path):
            return f"slice={spec.slice};axis={spec.axis}"
        if is_dicom(path):
            return f"frame={spec.frame}"
        return None

    def known_label(self, raw: str) -> bool:
        return self.manifest.label_spec(raw) is not None

    def add(self, image: Path, *, label: str | None = None, regions: Iterable[Region] = (),
            mask_path: Path | None = None, row_metadata: dict[str, str] | None = None,
            size: tuple[int, int] | None = None, grounded: bool = False) -> Sample | None:
        """Record one sample; returns None (with an exclusion) when it cannot be used.

        `grounded` says the sample exists for its regions, so losing all of them drops it.
        """
        source = self.rel(image)
        if not image.resolve().is_relative_to(self.raw_dir.resolve()):
            # ids are built from the path inside the dataset; a path outside it is neither stable nor safe
            self.exclude(source, "the labels point outside the dataset's folder")
            return None
        frame = self.frame_for(image)
        sample_id = make_sample_id(self.dataset_id, source, frame)
        if sample_id in self._seen:
            self.exclude(source, "the image is listed more than once; the first listing is kept", sample_id)
            return None
        if not image.is_file():
            self.exclude(source, f"the labels point to {source}, which is not in the fetched files", sample_id)
            return None
        if label is not None and not self.known_label(label):
            self.exclude(source, f"label {label!r} is not in the manifest's label vocabulary", sample_id)
            return None
        kept: list[Region] = []
        for region in regions:
            if self.known_label(region.label):
                kept.append(region)
            else:
                self.exclude(f"{source}#{region.instance}",
                             f"object label {region.label!r} is not in the manifest's label vocabulary",
                             make_sample_id(self.dataset_id, source, frame, region.instance))
        if grounded and not kept:
            self.exclude(source, "no annotated object with a known label is left in this image", sample_id)
            return None
        sample = Sample(
            sample_id=sample_id, dataset_id=self.dataset_id, source_path=source, image_path=image,
            frame=frame, label=label, regions=tuple(kept), mask_path=mask_path,
            image_size=size or image_size(image), file_metadata=header_metadata(image),
            row_metadata=row_metadata or {},
        )
        self.samples.append(sample)
        self._seen.add(sample_id)
        return sample
