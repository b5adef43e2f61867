"""One dataset's build after its files are fetched: layout → select → convert → metadata → questions → rows →
hashes.

`process_dataset(job)` is what the pipeline runs on a local process or a Dask worker. The select step runs only
under a profile that caps rows (`mmbu.build.selection`); it chooses the rows before conversion, so the convert step
reads its `selected.jsonl` instead of `samples.jsonl`. Each step is
skipped when its inputs' hash is unchanged (`StepState`), converted images are reused one by one
(`convert_resume`: the key each PNG was made from, its size and CRC), so a killed build resumes where it stopped.
Nothing here raises for bad data: bad items become exclusions, a broken dataset a failed outcome.
"""
from __future__ import annotations

import json
import os
import shutil
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from PIL import Image

from mmbu.build.cache import StepState, hash_file, hash_json
from mmbu.build.convert.base import ConvertOptions
from mmbu.build.convert.batch import convert_keeping_png
from mmbu.build.convert_resume import RESUME_FILE, ConvertedPngs
from mmbu.build.duplicates import HASH_VERSION, ImageHashes, image_table
from mmbu.build.duplicates.hashing import png_hashes
from mmbu.build.duplicates.table import (
    CONVERTED_HASHES_FILE, ConvertedHashesWriter, load_converted_hashes, rows_batches,
)
from mmbu.build.duplicates.check import HASHES_FILE
from mmbu.build.fetch import COMPLETION_RECORD
from mmbu.build.json_lines import LinesWriter, chunked, is_complete, parse_record, read_lines
from mmbu.build.layouts import Sample, read_samples_into
from mmbu.build.layouts.files import is_volume
from mmbu.build.layouts.volumes import with_converted_mask
from mmbu.build.metadata import MetadataChecks
from mmbu.build.questions import (ConvertedImage, TaskItem, attach_metadata, format_lint_report, instantiate_questions,
                                  lint_questions, load_prototypes, place_items, rows_frame, task_items)
from mmbu.build.questions.lint import drop_lint_failures
from mmbu.build.selection import SELECTED_FILE, SELECTION_FILE, RowFilter, select_samples
from mmbu.build.sorted_runs import SortedRuns, write_row_groups
from mmbu.core import budget
from mmbu.core.exclusions import Exclusion
from mmbu.core.files import atomic_path, sync_to_disk, write_json_atomic, write_text_atomic
from mmbu.core.landlock import ConfinedChildDied, landlock_abi, run_confined
from mmbu.core.version import toolkit_version
from mmbu.curation.composition import DatasetRule
from mmbu.curation.manifest import DatasetManifest, load_manifest
from mmbu.taxonomy import Taxonomy, load_taxonomy

ROWS_PER_GROUP = 8192  # rows.parquet row groups (~13 MB of rows in pandas)
# Part of every step's input hash. Bump it when what a step writes (samples.jsonl, converted.jsonl,
# rows.parquet) changes shape: the package version alone does not change between development edits,
# and a cached file in the old shape would otherwise be trusted (and fail the dataset). Converted
# PNGs are keyed by the package version only, so a bump re-runs the steps but reuses the images.
STEPS_FORMAT = 7
SAMPLES_FILE, CONVERTED_FILE = "samples.jsonl", "converted.jsonl"
# A worker holds a chunk of samples at a time, not its dataset: SAMPLES_PER_CHUNK samples are converted, and have
# their task rows made, at a time; METADATA_PER_CHUNK have their metadata validated at a time (pandera costs
# ~0.05-0.09 s per call whatever the rows: a dataset of up to 8,192 samples pays one call, as when the whole table
# was validated at once, 150,000 samples 19; a chunk holds ~3 KB per sample, ~25 MB)
SAMPLES_PER_CHUNK = 2048
METADATA_PER_CHUNK = 8192
HASH_BATCH_ROWS = 8192  # rows.parquet rows the hashes step reads at a time


@dataclass(frozen=True)
class DatasetJob:
    """Everything a worker needs for one dataset (picklable, paths only)."""

    manifest_path: Path
    data_dir: Path
    manifest: DatasetManifest | None = None  # parsed once by the pipeline; None: read from manifest_path
    taxonomy_path: Path | None = None
    seed: int = 0
    composition: DatasetRule | None = None  # None or a rule that caps nothing: every row (no select step)


@dataclass
class DatasetOutcome:
    dataset_id: str
    manifest_path: str
    ok: bool
    error: str | None = None
    rows_path: str | None = None
    exclusions: list[dict[str, Any]] = field(default_factory=list)
    ran: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    rows_per_task: dict[str, int] = field(default_factory=dict)
    lint_report: str = ""
    started_at: float = 0.0  # epoch seconds; with `seconds`, shows how busy the workers were (build-report.json)
    seconds: float = 0.0
    manifest_hash: str = ""  # of the parsed manifest, so the release check need not parse it again
    evidence: str = "none"  # weakest level of the host, licence and layout evidence (printed by `mmbu build`)
    selection: dict[str, dict[str, Any]] = field(default_factory=dict)  # task -> TaskSelection (capped profiles)
    step_seconds: dict[str, float] = field(default_factory=dict)  # each step that ran: its wall time
    step_cpu_seconds: dict[str, float] = field(default_factory=dict)  # ... and its CPU time


@lru_cache(maxsize=4)
def cached_taxonomy(path: str | None) -> Taxonomy:
    """The taxonomy once per process (the pipeline warms it before forking so local workers share it)."""
    return load_taxonomy(path)


CONFINE_VARIABLE = "MMBU_CONFINE"  # "0": run the dataset's steps without the Landlock restriction


def process_dataset(job: DatasetJob) -> DatasetOutcome:
    """Build one fetched dataset's release rows into `work/<id>/rows.parquet`; never raises.

    Where the kernel has Landlock, the steps run in a child process that can read only the dataset's `raw/<id>/`
    and `work/<id>/` (and what Python needs: `mmbu.core.landlock`), so a parser that a hostile file leads astray
    costs this dataset, never a file of the machine. `MMBU_CONFINE=0` turns that off."""
    dataset_id = job.manifest.id if job.manifest else Path(job.manifest_path).stem
    data_dir = Path(job.data_dir)
    raw_dir, work = data_dir / "raw" / dataset_id, data_dir / "work" / dataset_id
    if os.environ.get(CONFINE_VARIABLE) == "0" or not landlock_abi():
        return process_dataset_here(job)
    work.mkdir(parents=True, exist_ok=True)
    scratch = work / SCRATCH_FOLDER
    readable = [raw_dir, work, *([] if job.manifest else [Path(job.manifest_path)]),
                *([Path(job.taxonomy_path)] if job.taxonomy_path else [])]
    try:
        return run_confined(process_dataset_here, job, readable, scratch=scratch)
    except ConfinedChildDied as exc:
        return DatasetOutcome(dataset_id=dataset_id, manifest_path=str(job.manifest_path), ok=False,
                              error=f"{dataset_id}: {exc}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


SCRATCH_FOLDER = ".mmbu-tmp"  # the confined steps' temporary folder (TMPDIR), inside work/<id>/


def process_dataset_here(job: DatasetJob) -> DatasetOutcome:
    """`process_dataset` in this process, unconfined."""
    started = time.perf_counter()
    manifest = job.manifest or load_manifest(job.manifest_path)
    outcome = DatasetOutcome(dataset_id=manifest.id, manifest_path=str(job.manifest_path), ok=False,
                             started_at=time.time(), manifest_hash=hash_json(manifest.model_dump(mode="json")),
                             evidence=manifest.evidence.weakest_required() if manifest.evidence else "none")
    try:
        with budget.limited(manifest.budget.limits() if manifest.budget else None):  # lowered, never raised
            _process(job, manifest, outcome)
        outcome.ok = True
    except Exception as exc:  # noqa: BLE001 - a broken dataset is reported, the others go on
        last = traceback.extract_tb(exc.__traceback__)[-1]
        outcome.error = (f"{manifest.id}: unexpected {type(exc).__name__} in {Path(last.filename).name}:"
                         f"{last.lineno}: {exc}")
    outcome.seconds = round(time.perf_counter() - started, 6)  # a no-op dataset takes well under a millisecond
    return outcome


def _process(job: DatasetJob, manifest: DatasetManifest, outcome: DatasetOutcome) -> None:
    data_dir = Path(job.data_dir)
    raw_dir = data_dir / "raw" / manifest.id
    work = data_dir / "work" / manifest.id
    state = StepState(work / "state.json")
    taxonomy = cached_taxonomy(str(job.taxonomy_path) if job.taxonomy_path else None)
    raw_identity = _raw_identity(raw_dir)
    code = toolkit_version()

    # layout: which samples the fetched files hold
    layout_spec = manifest.model_dump(include={"id", "layout", "labels", "tasks", "convert"})
    # The steps' files name their inputs and outputs by paths made from the data folder's: a data folder copied or
    # moved elsewhere would otherwise find its steps fresh while every path in them still points into the folder it
    # came from. The path as given (made absolute, links not followed) is what those paths are built from.
    layout_key = hash_json([code, STEPS_FORMAT, layout_spec, raw_identity, os.path.abspath(data_dir)])
    samples_path, layout_exclusions_path = work / SAMPLES_FILE, work / "layout-exclusions.json"
    # a file torn after the step recorded it (cut short by a copy, a full disk) is made again, never read short
    if state.is_fresh("layout", layout_key) and is_complete(samples_path):
        outcome.skipped.append("layout")
    else:
        since = (time.perf_counter(), time.process_time())
        state.forget_from(["select", "convert", "rows", "hashes"])
        with LinesWriter(samples_path) as lines:
            sink = _SamplesOut(lines, work / "layout-cache")
            count, exclusions = read_samples_into(manifest, raw_dir, sink, work / "layout-cache")
            sink.raise_failure()
        write_json_atomic(layout_exclusions_path, [e.model_dump() for e in exclusions])
        state.record("layout", layout_key, [samples_path, layout_exclusions_path, *sink.derived], {"samples": count})
        _ran(outcome, "layout", since)
    exclusions = _read_exclusions(layout_exclusions_path)

    # select: the rows the profile takes, chosen before anything is converted (a profile that caps nothing: skipped)
    to_convert, row_filter = samples_path, None
    rule = job.composition if job.composition is not None and job.composition.selects else None
    if rule is not None:
        to_convert, selection_path = work / SELECTED_FILE, work / SELECTION_FILE
        select_key = hash_json([layout_key, hash_file(samples_path), manifest.tasks,
                                rule.model_dump(mode="json")])
        if state.is_fresh("select", select_key) and is_complete(to_convert):
            outcome.skipped.append("select")
        else:
            since = (time.perf_counter(), time.process_time())
            state.forget_from(["convert", "rows", "hashes"])
            chosen = select_samples(samples_path, manifest, rule, to_convert, selection_path)
            state.record("select", select_key, [to_convert, selection_path],
                         {"summary": {task: s.model_dump() for task, s in chosen.summary.items()}})
            _ran(outcome, "select", since)
        outcome.selection = state.outputs("select").get("summary", {})
        row_filter = RowFilter.read(selection_path, rule.seed)

    # convert: PNG per image (and per mask), boxes and regions moved into the PNG frame
    # (keyed by the bytes it reads: a selection of every sample converts nothing again when the profile changes)
    convert_key = hash_json([layout_key, hash_file(to_convert)])
    converted_path, convert_exclusions_path = work / CONVERTED_FILE, work / "convert-exclusions.json"
    if state.is_fresh("convert", convert_key) and is_complete(converted_path):
        outcome.skipped.append("convert")
    else:
        since = (time.perf_counter(), time.process_time())
        state.forget_from(["rows", "hashes"])
        dropped: list[Exclusion] = []
        made: list[str] = []  # every PNG: the step's outputs (state.json lists them), a string each
        with LinesWriter(converted_path) as lines, ConvertedHashesWriter(work / CONVERTED_HASHES_FILE) as kept:
            # the samples are parsed only when a step needs them: a no-op rebuild of 78K samples stays in seconds
            for chunk in chunked(map(Sample.model_validate_json, read_lines(to_convert)), SAMPLES_PER_CHUNK):
                hashes: dict[Path, ImageHashes] = {}
                converted, conversions, lost = convert_samples(chunk, manifest, work, code, hashes)
                for sample in converted:
                    lines.write(converted_line(sample, conversions[sample.sample_id]))
                dropped += lost
                kept.add({c.png: hashes[c.png] for c in conversions.values() if c.png in hashes})
                made += [str(p) for c in conversions.values() for p in (c.png, c.mask_png) if p is not None]
        write_json_atomic(convert_exclusions_path, [e.model_dump() for e in dropped])
        sync_to_disk()  # PNGs and resume records were written without fsync: on disk before the step is done
        state.record("convert", convert_key, [converted_path, convert_exclusions_path,
                                              work / CONVERTED_HASHES_FILE, *made],
                     {"images": lines.count})
        _ran(outcome, "convert", since)
    exclusions += _read_exclusions(convert_exclusions_path)

    # rows: metadata (pandera) → task items → questions → lint
    # the questions' version too: their wording and answers change between development edits of one package version
    rows_inputs = [convert_key, hash_file(converted_path), manifest.model_dump(mode="json"), taxonomy.content_hash,
                   job.seed, load_prototypes().version]
    if row_filter is not None:  # appended only then, so that every row of every dataset keeps its key under `full`
        rows_inputs.append(hash_file(selection_path))
    rows_key = hash_json(rows_inputs)
    rows_path, rows_exclusions_path = work / "rows.parquet", work / "rows-exclusions.json"
    report_path = work / "lint-report.txt"
    if state.is_fresh("rows", rows_key):
        outcome.skipped.append("rows")
    else:
        since = (time.perf_counter(), time.process_time())
        with SortedRuns(rows_path, ROWS_ORDER) as runs:
            dropped, lint_report = build_rows(ConvertedFile(converted_path), manifest, taxonomy, work, job.seed, runs,
                                              keep=row_filter)
            written = write_rows_file(runs, rows_path)
        write_json_atomic(rows_exclusions_path, [e.model_dump() for e in dropped])
        write_text_atomic(report_path, lint_report)
        sync_to_disk()  # the ROI PNGs were written without fsync
        state.record("rows", rows_key, [rows_path, rows_exclusions_path, report_path, *written.masks],
                     {"rows": written.rows, "per_task": written.per_task})
        _ran(outcome, "rows", since)
    exclusions += _read_exclusions(rows_exclusions_path)

    # hashes: each image's perceptual hashes, for the build's cross-dataset duplicate check
    hashes_key = hash_json([rows_key, HASH_VERSION])
    hashes_path = work / HASHES_FILE
    if state.is_fresh("hashes", hashes_key):
        outcome.skipped.append("hashes")
    else:
        since = (time.perf_counter(), time.process_time())
        previous = pd.read_parquet(hashes_path) if hashes_path.exists() else None  # unchanged PNGs keep theirs
        # hashed by the convert step while it held the pixels: only PNGs without such hashes are opened
        table = image_table(rows_batches(rows_path, HASH_BATCH_ROWS), previous,
                            load_converted_hashes(work / CONVERTED_HASHES_FILE))
        _write_parquet_atomic(table, hashes_path)
        state.record("hashes", hashes_key, [hashes_path], {"images": int(table["image_id"].nunique())})
        _ran(outcome, "hashes", since)
    outcome.lint_report = report_path.read_text(encoding="utf-8")
    outcome.rows_path = str(rows_path)
    outcome.exclusions = [e.model_dump() for e in exclusions]
    # counted when the rows were made (opening 40 Parquet files made up a sixth of a no-op rebuild)
    outcome.rows_per_task = (state.outputs("rows").get("per_task")
                             or _count_tasks(pd.read_parquet(rows_path, columns=["task"])["task"]))


def _ran(outcome: DatasetOutcome, step: str, since: tuple[float, float]) -> None:
    """The step ran: its wall and CPU time (this process's: a worker runs one dataset at a time)."""
    outcome.ran.append(step)
    outcome.step_seconds[step] = round(time.perf_counter() - since[0], 6)
    outcome.step_cpu_seconds[step] = round(time.process_time() - since[1], 6)


def _count_tasks(tasks: pd.Series) -> dict[str, int]:
    return {str(k): int(v) for k, v in tasks.value_counts().sort_index().items()}


def _read_exclusions(path: Path) -> list[Exclusion]:
    return [Exclusion.model_validate(e) for e in json.loads(path.read_text(encoding="utf-8"))]


class _SamplesOut:
    """The layout step's sink: each sample a line of samples.jsonl as the layout finds it. Keeps the layout-cache
    files the samples name (derived layouts only; a string each): the step's outputs, gone → read the layout again."""

    def __init__(self, lines: LinesWriter, cache: Path) -> None:
        self.lines, self.cache = lines, cache
        self.derived: list[str] = []
        self.failure: BaseException | None = None

    def append(self, sample: Sample) -> None:
        try:
            self.lines.write(sample.model_dump_json())
        except BaseException as exc:
            self.failure = exc  # a layout reports its own errors as exclusions and goes on: this one stops the step
            raise
        self.derived += [str(p) for p in (sample.image_path, sample.mask_path)
                         if p is not None and p.is_relative_to(self.cache)]

    def raise_failure(self) -> None:
        """Re-raise a write failure (a full disk) that the layout caught: samples.jsonl must not be kept short."""
        if self.failure is not None:
            raise self.failure


def converted_line(sample: Sample, conversion: ConvertedImage) -> str:
    """One line of converted.jsonl: `[sample id, sample, conversion]`, the id first so that the rows step lists the
    ids without parsing the samples (`ConvertedFile.repeated_ids`)."""
    saved = {"png": str(conversion.png), "record": conversion.record,
             "mask_png": conversion.mask_png and str(conversion.mask_png)}
    return (f"[{json.dumps(sample.sample_id)},{sample.model_dump_json()},"
            f"{json.dumps(saved, sort_keys=True, default=str)}]")


class ConvertedFile:
    """The convert step's `converted.jsonl`, read a line at a time: (sample, conversion) pairs in the layout's order."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __iter__(self) -> Iterator[tuple[Sample, ConvertedImage]]:
        for line in read_lines(self.path):
            _, sample, saved = parse_record(line)
            yield Sample.model_validate(sample), ConvertedImage(
                png=Path(saved["png"]), record=saved["record"],
                mask_png=Path(saved["mask_png"]) if saved["mask_png"] else None)

    def repeated_ids(self) -> frozenset[str]:
        """The sample ids on more than one line (none, as layouts refuse a second listing; the metadata schema's
        uniqueness check needs them before its first chunk): a set of every id is held while they are counted."""
        decode = json.JSONDecoder().raw_decode
        seen: set[str] = set()
        repeated: set[str] = set()
        for line in read_lines(self.path):
            sample_id = decode(line, 1)[0]
            (repeated if sample_id in seen else seen).add(sample_id)
        return frozenset(repeated)


def _raw_identity(raw_dir: Path) -> str:
    """What the fetch stage says it put in raw/<id>/ (its completion record), or the file listing."""
    record = raw_dir / COMPLETION_RECORD
    if record.exists():
        return hash_file(record)
    files = sorted(p for p in raw_dir.rglob("*") if p.is_file()) if raw_dir.is_dir() else []
    return hash_json([(str(p.relative_to(raw_dir)), p.stat().st_size, p.stat().st_mtime_ns) for p in files])


def convert_options(manifest: DatasetManifest, *, as_mask: bool = False, slice_mask: Path | None = None,
                    view: dict[str, Any] | None = None) -> ConvertOptions:
    """The manifest's `convert:` options, with one sample's own `view` (a video frame, a series) over them."""
    spec = manifest.convert
    options = ConvertOptions(as_mask=as_mask, max_size=spec.max_size, frame=spec.frame, slice=spec.slice,
                             axis=spec.axis, window=spec.window, slice_mask=slice_mask,
                             square_pixels=spec.square_pixels, series=0 if spec.series == "each" else spec.series,
                             z=spec.z, t=spec.t)
    return replace(options, **view) if view else options


def _convert_cached(source: Path, output: Path, options: ConvertOptions, code: str, made: ConvertedPngs,
                    companions: tuple[Path, ...] = ()) -> tuple[dict[str, Any], ImageHashes | None]:
    """Convert one file unless its PNG was already made from the same source and options (resume).

    `companions` are the other files the converter reads with `source` (the instances of a DICOM
    whole-slide series, any of which may hold the level read): a change to one of them converts again.
    Returns the conversion record and, for an image (not a mask), the PNG's perceptual hashes: taken from the
    pixels while they are in memory and kept in `made`, so the hashes step need not decode the PNG again.
    """
    stat = source.stat()
    key_parts = [code, str(source), stat.st_size, stat.st_mtime_ns, repr(options)]
    if companions:  # appended only when present, so the keys of every other PNG stay what they were
        key_parts.append([(str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in companions if p.exists()])
    key = hash_json(key_parts)
    if (reused := made.reusable(output, key)) is not None:
        return reused
    # The PNG is neither fsynced (~4 ms, a fifth of a worker's time) nor written through a temporary file and a
    # rename (a fifth of what was left, on a busy disk): the step syncs once before it records itself done, and
    # `made` vouches only for a file of the size and CRC it noted, so a PNG torn by a kill is converted again.
    result = convert_keeping_png(source, output, options, durable=False, atomic=False)
    if result.data is None:
        return result.record, None
    hashes = None if options.as_mask else png_hashes(result.pixels, result.data)
    made.remember(output, key, result.record, result.data, hashes)  # the bytes just written, not read back
    return result.record, hashes


def convert_samples(samples: list[Sample], manifest: DatasetManifest, work: Path, code: str,
                    hashes: dict[Path, ImageHashes] | None = None,
                    ) -> tuple[list[Sample], dict[str, ConvertedImage], list[Exclusion]]:
    """Each sample's image as PNG (and, for volumes, its mask slice through the same transform).

    Returns the samples (volume samples with their regions read from the converted slice), the
    conversions keyed by sample id, and what could not be converted. `hashes`, if given, receives the
    perceptual hashes of the image PNGs that have them (`_convert_cached`), by PNG path.
    """
    kept: list[Sample] = []
    conversions: dict[str, ConvertedImage] = {}
    dropped: list[Exclusion] = []
    with ConvertedPngs(work / RESUME_FILE) as made:
        for sample in samples:
            # NIfTI pairs choose the slice from the mask (largest area) when the manifest says so
            slice_mask = sample.mask_path if manifest.convert.slice == "mask_max_area" else None
            image_png = work / "images" / f"{sample.sample_id}.png"
            options = convert_options(manifest, slice_mask=slice_mask, view=sample.view)
            record, image_hashes = _convert_cached(Path(sample.image_path), image_png, options, code, made,
                                                   tuple(Path(p) for p in sample.companion_paths))
            if image_hashes is not None and hashes is not None:
                hashes[image_png] = image_hashes
            if record["status"] != "ok":
                dropped.append(_convert_exclusion(sample, sample.source_path, record["error"]))
                continue
            mask_png_path = None
            if sample.mask_path is not None and is_volume(Path(sample.mask_path)):
                mask_png_path = work / "masks" / f"{sample.sample_id}.png"
                mask_record, _ = _convert_cached(Path(sample.mask_path), mask_png_path,
                                                 convert_options(manifest, as_mask=True, slice_mask=slice_mask),
                                                 code, made)
                if mask_record["status"] != "ok":
                    dropped.append(_convert_exclusion(sample, str(sample.mask_path), mask_record["error"]))
                    continue
                sample, lost = with_converted_mask(sample, np.asarray(Image.open(mask_png_path)), manifest)
                dropped += lost
                if sample is None:
                    continue
            kept.append(sample)
            conversions[sample.sample_id] = ConvertedImage(png=image_png, record=record, mask_png=mask_png_path)
    return kept, conversions, dropped


def _convert_exclusion(sample: Sample, item: str, reason: str) -> Exclusion:
    return Exclusion(dataset_id=sample.dataset_id, sample_id=sample.sample_id, item=item, stage="convert",
                     reason=reason)


def build_rows(converted: Iterable[tuple[Sample, ConvertedImage]], manifest: DatasetManifest, taxonomy: Taxonomy,
               work: Path, seed: int, rows: SortedRuns,
               keep: Callable[[list[TaskItem]], list[TaskItem]] | None = None) -> tuple[list[Exclusion], str]:
    """Release rows (image/mask as PNG paths) for one dataset, added to `rows` a chunk at a time (sorted and kept on
    disk there, so they never pile up in memory), with what was dropped and the lint report.

    `converted` is read once, a chunk at a time (a `ConvertedFile`, or a list of pairs; `repeated_ids()` is asked
    for when it has one). Metadata is validated METADATA_PER_CHUNK samples at a time (`MetadataChecks`: the outcome
    of one call over the whole table); items are made, placed, asked and linted SAMPLES_PER_CHUNK samples at a time:
    the typed rows of those stages cost several times the finished rows (600 MB for 74K rows of 8,600 image/mask
    pairs), so only one chunk of them is alive. Every stage works row by row (options are seeded per sample), so
    the rows are those of one pass; exclusions keep their stage order. `keep` (the select step's `RowFilter`) keeps
    the task rows the composition chose; the others are not made (they are not exclusions: nothing was wrong).
    """
    repeated = converted.repeated_ids() if isinstance(converted, ConvertedFile) else _repeated_ids(converted)
    checks = MetadataChecks(manifest, taxonomy, repeated)
    lints = []
    lost: dict[str, list[Exclusion]] = {"attach": [], "place": [], "questions": [], "lint": []}
    for block in _blocks(converted, METADATA_PER_CHUNK):
        valid = checks.validate([sample for sample, _ in block])
        for start in range(0, max(len(block), 1), SAMPLES_PER_CHUNK):
            part = block[start:start + SAMPLES_PER_CHUNK]
            items = task_items([sample for sample, _ in part], manifest)
            items, dropped = attach_metadata(keep(items) if keep is not None else items, valid)
            lost["attach"] += dropped
            placed, dropped = place_items(items, {s.sample_id: c for s, c in part}, work / "roi")
            lost["place"] += dropped
            questions, dropped = instantiate_questions(placed, manifest, taxonomy, seed)
            lost["questions"] += dropped
            del items, placed
            lint = lint_questions(questions, taxonomy)
            questions, dropped = drop_lint_failures(questions, lint)
            lost["lint"] += dropped
            rows.add(rows_frame(questions))  # the one table the typed rows become
            del questions
            lints.append(lint)
        del block, valid
    lint = pd.concat(lints, ignore_index=True) if len(lints) > 1 else lints[0]
    lost["lint"].sort(key=lambda e: e.sample_id or "")  # as drop_lint_failures lists them (by sample id)
    return [*checks.exclusions(), *(e for stage in lost.values() for e in stage)], format_lint_report(lint)


def _blocks(pairs: Iterable[tuple[Sample, ConvertedImage]], size: int) -> Iterator[list[tuple[Sample, ConvertedImage]]]:
    """`pairs` in lists of `size`; one empty list for none (the empty dataset's lint report and metadata check)."""
    empty = True
    for block in chunked(pairs, size):
        empty = False
        yield block
    if empty:
        yield []


def _repeated_ids(pairs: Iterable[tuple[Sample, ConvertedImage]]) -> frozenset[str]:
    counts = Counter(sample.sample_id for sample, _ in pairs)
    return frozenset(sample_id for sample_id, count in counts.items() if count > 1)


# rows.parquet's order, the release's within a config: the rows of one image together (image id, then row id), so a
# row group stores an image shared by its rows once (Parquet dictionary encoding, `mmbu.build.release.shards`)
ROWS_ORDER = ["task", "image_sample_id", "sample_id"]


@dataclass
class RowsWritten:
    rows: int
    per_task: dict[str, int]
    # every mask PNG the rows name: the step's outputs, each checked to exist before the step is trusted again
    # (state.json lists them), so a string per mask row is kept while the file is written
    masks: list[str]


def write_rows_file(runs: SortedRuns, path: Path) -> RowsWritten:
    """`rows.parquet` from the rows step's sorted runs, merged a batch at a time: sorted by ROWS_ORDER (as
    one stable sort of every row would), in row groups of ROWS_PER_GROUP, so that the release reads a config's rows
    front to back a batch at a time (`mmbu.build.release.stream`). Memory holds a row group and a batch per run,
    whatever the number of rows."""
    schema, tables = runs.merged()
    per_task: Counter[str] = Counter()
    masks: list[str] = []

    def counted(tables: Iterator[pa.Table]) -> Iterator[pa.Table]:
        for table in tables:
            tasks, counts = pc.value_counts(table.column("task")).flatten()
            per_task.update(dict(zip(tasks.to_pylist(), counts.to_pylist())))
            if "mask" in table.column_names:
                masks.extend(table.column("mask").drop_null().to_pylist())
            yield table

    with atomic_path(path) as temporary:
        total = write_row_groups(counted(tables), schema, temporary, ROWS_PER_GROUP)
    return RowsWritten(total, {str(task): int(count) for task, count in sorted(per_task.items())}, masks)


def _write_parquet_atomic(frame: pd.DataFrame, path: Path, **options: Any) -> None:
    with atomic_path(path) as temporary:
        frame.to_parquet(temporary, index=False, **options)
