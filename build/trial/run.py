"""One dataset tried the way the build will take it: fetched, read by its layout, built into question rows, and
counted per label and split, with a diagnosis of the layout's patterns when it finds nothing or far fewer samples
than its evidence states."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from mmbu.build.fetch import FetchResult, LockFile, fetch_dataset
from mmbu.build.json_lines import read_lines
from mmbu.build.layouts import Sample
from mmbu.build.layouts.diagnose import PatternCheck, check_patterns, layout_patterns, top_levels
from mmbu.build.steps import SAMPLES_FILE, DatasetJob, DatasetOutcome, process_dataset
from mmbu.curation.http import PoliteSession
from mmbu.curation.manifest import DatasetManifest
from mmbu.curation.manifest.templates import PathTemplate, TemplateError

FAR_FEWER = 0.5  # under half the count the evidence states: the patterns are worth a look
NO_SPLIT = "-"


@dataclass
class TrialReport:
    """What trying one dataset found; `fetch.status == "error"` means nothing after the fetch ran."""

    manifest: DatasetManifest
    fetch: FetchResult
    outcome: DatasetOutcome | None = None
    samples: int = 0
    counts: Counter[tuple[str, str]] = field(default_factory=Counter)  # (split, raw label) -> images or objects
    checks: list[PatternCheck] = field(default_factory=list)  # filled when the layout finds none or far fewer
    tree: list[str] = field(default_factory=list)  # the fetched tree's top levels, with the checks
    rows: pd.DataFrame | None = None

    @property
    def stated(self) -> int | None:
        return self.manifest.evidence.samples.count if self.manifest.evidence else None

    @property
    def far_fewer(self) -> bool:
        return self.samples == 0 or (self.stated is not None and self.samples < FAR_FEWER * self.stated)


def try_dataset(manifest_path: Path, manifest: DatasetManifest, data_dir: Path, *, mirror: Path | None = None,
                lock: LockFile | None = None, session: PoliteSession | None = None, repo_root: Path | None = None,
                taxonomy_path: Path | None = None) -> TrialReport:
    """Fetch one dataset into `data_dir/raw/<id>/` (pinning new files in `lock`) and build its rows in
    `data_dir/work/<id>/`, as `mmbu build` would; never raises for a dataset problem."""
    fetched = fetch_dataset(manifest, data_dir, mirror=mirror, lock=lock, session=session, repo_root=repo_root)
    report = TrialReport(manifest=manifest, fetch=fetched)
    if fetched.status == "error":
        return report
    report.outcome = process_dataset(DatasetJob(manifest_path=manifest_path, data_dir=data_dir, manifest=manifest,
                                                taxonomy_path=taxonomy_path))
    samples_path = data_dir / "work" / manifest.id / SAMPLES_FILE
    splits = split_templates(manifest)
    for sample in map(Sample.model_validate_json, read_lines(samples_path) if samples_path.is_file() else []):
        report.samples += 1
        split = split_of(sample, splits)
        if sample.label is not None:
            report.counts[(split, sample.label)] += 1
        report.counts.update((split, region.label) for region in sample.regions)
    if report.far_fewer:
        raw_dir = data_dir / "raw" / manifest.id
        report.checks = check_patterns(manifest.layout, raw_dir)
        report.tree = top_levels(raw_dir)
    if report.outcome.ok and report.outcome.rows_path:
        report.rows = pd.read_parquet(report.outcome.rows_path)
    return report


def split_templates(manifest: DatasetManifest) -> list[tuple[PathTemplate, bool]]:
    """The layout's templates naming a `{split}` part, each marked whether it names an array key (matched
    against a sample's frame) rather than a file (matched against its path)."""
    layout = manifest.layout
    texts = [(pattern, False) for _, pattern, folders in layout_patterns(layout) if not folders]
    texts += [(ref.key, True) for ref in (getattr(layout, "images", None), getattr(layout, "labels", None))
              if getattr(ref, "key", None)]
    found = []
    for text, is_key in texts:
        if "{split}" in text:
            try:
                found.append((PathTemplate(text), is_key))
            except TemplateError:  # a Python format field (volume_table's `volume`), not a template
                continue
    return found


def split_of(sample: Sample, templates: list[tuple[PathTemplate, bool]]) -> str:
    """The `{split}` part of the sample's file (or array key), or "-" when the layout names no split."""
    key = dict(part.split("=", 1) for part in (sample.part or "").split(";") if "=" in part).get("key")
    for template, is_key in templates:
        target = key if is_key else sample.source_path
        parts = template.match(target) if target else None
        if parts and "split" in parts:
            return parts["split"]
    return NO_SPLIT
