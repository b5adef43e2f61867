"""Write a whole release directory atomically (docs/architecture.md §3.4).

Everything is written into a hidden sibling directory first; only a complete release is renamed
into place, so a reader never sees a half-written one and a killed build leaves the old one intact.
"""
from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from mmbu.build.executors import RunJobs, in_this_process
from mmbu.build.release.card import render_card, render_license
from mmbu.build.release.checksums import file_sha256, write_sha256sums
from mmbu.build.release.croissant import build_croissant
from mmbu.build.release.rows import RowsFiles, frame_rows_files
from mmbu.build.release.shards import MAX_ROW_GROUP_BYTES, MAX_SHARD_BYTES
from mmbu.build.release.stats import ReleaseCounts, write_statistics
from mmbu.build.release.stream import write_files
from mmbu.core.exclusions import EXCLUSION_COLUMNS, Exclusion
from mmbu.core.files import replace_folder
from mmbu.core.outputs import write_csv
from mmbu.core.release import TASKS as CONFIGS
from mmbu.curation.manifest import DatasetManifest

DESCRIPTION = ("Biomedical visual-perception benchmark (MMBU) rebuilt from public datasets: ungrounded, "
               "box-grounded and mask-grounded classification and object detection, closed and open forms, "
               "three prompt templates, 13 metadata fields per row.")


@dataclass(frozen=True)
class ConfigJob:
    """One config's shards to write into `directory` (picklable: a worker process may run it)."""

    config: str
    rows: RowsFiles
    directory: Path
    max_shard_bytes: int
    max_row_group_bytes: int


@dataclass
class ConfigWritten:
    config: str
    shards: list[Path]
    counts: ReleaseCounts  # what the card and the statistics count of the written rows
    exclusions: list[Exclusion]
    digests: dict[Path, str]


def write_config(job: ConfigJob) -> ConfigWritten:
    """Check, shard and hash one config's rows (the release's heavy part: PNGs read, hashed, written)."""
    shards, checked = write_files(job.rows, job.directory, job.max_shard_bytes, job.max_row_group_bytes)
    return ConfigWritten(job.config, shards, checked.counts.compact(), checked.exclusions,
                         {p: file_sha256(p) for p in shards})


@dataclass
class ReleaseSummary:
    """What was written: shards per config, row counts, and items dropped by the writer itself."""

    path: Path
    shards: dict[str, list[Path]] = field(default_factory=dict)
    rows: dict[str, int] = field(default_factory=dict)
    exclusions: list[Exclusion] = field(default_factory=list)
    statistics: dict = field(default_factory=dict)


def _exclusion_frame(exclusions: Iterable[Exclusion] | pd.DataFrame) -> pd.DataFrame:
    if isinstance(exclusions, pd.DataFrame):
        frame = exclusions.reindex(columns=list(EXCLUSION_COLUMNS))
    else:
        frame = pd.DataFrame([e.model_dump() for e in exclusions], columns=list(EXCLUSION_COLUMNS))
    frame["distance"] = frame["distance"].astype("Int64")  # "3", not "3.0", beside the empty cells
    return frame.sort_values(["dataset_id", "stage", "item", "reason"], na_position="first").reset_index(drop=True)


def _write_json(path: Path, document: object) -> None:
    path.write_text(json.dumps(document, indent=2, ensure_ascii=False, default=str) + "\n", encoding="utf-8")


def write_release(rows_by_task: Mapping[str, pd.DataFrame | RowsFiles], out_dir: str | Path,
                  manifests: Sequence[DatasetManifest], build_info: Mapping[str, object], *,
                  exclusions: Iterable[Exclusion] | pd.DataFrame = (), version: str = "0.1.0",
                  max_shard_bytes: int = MAX_SHARD_BYTES, max_row_group_bytes: int = MAX_ROW_GROUP_BYTES,
                  homepage: str | None = None, run_jobs: RunJobs = in_this_process) -> ReleaseSummary:
    """Write `<out_dir>/` with data shards, README.md card, LICENSE, croissant.json, build_info.json,
    exclusions.csv, stats/ and SHA256SUMS, replacing any previous release only once all is written.

    `rows_by_task` maps a task config to its rows: `RowsFiles` (per-dataset rows files, as the build hands them),
    read where the config is written, or a DataFrame of question rows (`rows_frame` output; `image` a PNG path,
    bytes or `{bytes, path}`, `mask` also a boolean array), first written into a rows file beside `out_dir`, so that
    both are written by the one writer, `stream.write_files`. Boxes must already be in the PNG's pixel frame.
    Configs without rows are left out of the card (an empty Parquet shard cannot be loaded). Rows whose image is
    missing or not a PNG are dropped and listed in exclusions.csv with stage `release`. `run_jobs` runs the
    configs (default: one after the other in this process; the build passes its worker processes).
    """
    out_dir = Path(out_dir)
    unknown = sorted(set(rows_by_task) - set(CONFIGS))
    if unknown:
        raise ValueError(f"unknown task config(s) {', '.join(unknown)}; expected {', '.join(CONFIGS)}")
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = out_dir.with_name(f".{out_dir.name}.tmp-{os.getpid()}")
    frames = out_dir.with_name(f".{out_dir.name}.rows.tmp-{os.getpid()}")  # rows given as DataFrames, as rows files
    for folder in (staging, frames):
        shutil.rmtree(folder, ignore_errors=True)
    staging.mkdir()  # also when no config has rows: the card, exclusions and checksums still get written
    summary = ReleaseSummary(path=out_dir)
    try:
        files = {config: rows if isinstance(rows, RowsFiles) else frame_rows_files(rows, config, frames)
                 for config, rows in rows_by_task.items()}
        kept, digests = _write_configs(files, staging, max_shard_bytes, max_row_group_bytes, summary, run_jobs)
        all_exclusions = _exclusion_frame(
            pd.concat([_exclusion_frame(exclusions), _exclusion_frame(summary.exclusions)], ignore_index=True))
        write_csv(staging / "exclusions.csv", all_exclusions)  # cells that cannot start a formula
        counts = {config: written.per_dataset() for config, written in kept.items()}
        used = {dataset_id for per in counts.values() for dataset_id in per}
        sources = [m for m in manifests if m.id in used]
        card = render_card(counts, sources, version, len(all_exclusions), build_info)
        (staging / "README.md").write_text(card, encoding="utf-8")
        (staging / "LICENSE").write_text(render_license(sources), encoding="utf-8")
        published = str(build_info.get("created") or datetime.now(timezone.utc).isoformat())[:10]
        _write_json(staging / "croissant.json", build_croissant(
            staging, summary.shards, digests, sources, version, DESCRIPTION, published, homepage))
        _write_json(staging / "build_info.json", {**build_info, "release_version": version, "rows": summary.rows})
        summary.statistics = write_statistics(kept, staging / "stats")
        write_sha256sums(staging, digests)
        replace_folder(staging, out_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    finally:
        shutil.rmtree(frames, ignore_errors=True)
    summary.shards = {c: [out_dir / p.relative_to(staging) for p in paths] for c, paths in summary.shards.items()}
    return summary


def _write_configs(rows_by_task: Mapping[str, RowsFiles], staging: Path, max_shard_bytes: int,
                   max_row_group_bytes: int, summary: ReleaseSummary,
                   run_jobs: RunJobs) -> tuple[dict[str, ReleaseCounts], dict[Path, str]]:
    """Shards of every config with rows, streamed row group by row group, and their sha256; returns per
    config what the card and the statistics count of the written rows, and the digests."""
    jobs = [ConfigJob(config, rows, staging / "data" / config, max_shard_bytes, max_row_group_bytes)
            for config in CONFIGS if (rows := rows_by_task.get(config)) is not None and rows.count]
    jobs.sort(key=lambda job: job.rows.count, reverse=True)  # the longest first, on parallel workers
    written = {result.config: result for result in run_jobs(write_config, jobs)}
    kept: dict[str, ReleaseCounts] = {}
    digests: dict[Path, str] = {}
    for config in CONFIGS:  # summaries in config order, whatever order the configs were written in
        result = written.get(config)
        if result is None:
            continue
        summary.exclusions.extend(result.exclusions)
        if not result.shards:
            continue
        summary.shards[config] = result.shards
        summary.rows[config] = result.counts.total
        kept[config] = result.counts
        digests.update(result.digests)
    return kept, digests


