"""The whole build: manifests → fetch → (per dataset) layout, select, convert, rows, hashes → duplicates →
release.

Fetching runs in this process (the lock file of sha256 pins has one writer); the per-dataset work
runs on local processes or a Dask cluster through the same function, `steps.process_dataset`. The
release is rewritten only when its inputs changed, so a second `make dataset` is a quick no-op.
"""
from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import pandas as pd

from mmbu.build.cache import hash_file, hash_json
from mmbu.build.data_lock import data_folder_lock, remove_stale_temporaries
from mmbu.build.duplicates import DEFAULT_MAX_DISTANCE, DuplicateCheck
from mmbu.build.duplicates.check import check_duplicates_saved
from mmbu.build.executors import ExecutorName, RunJobs, WorkerDied, run_all
from mmbu.build.fetch import FetchResult, LockFile, fetch_manifest_file, repository_root
from mmbu.build.fetch.plan import FetchPlan, plan_fetch
from mmbu.build.steps import DatasetJob, DatasetOutcome, cached_taxonomy, process_dataset
from mmbu.core.exclusions import EXCLUSION_COLUMNS
from mmbu.core.files import write_json_atomic, write_text_atomic
from mmbu.core.version import toolkit_version
from mmbu.curation.composition import LoadedComposition, load_composition
from mmbu.curation.http import configured_session
from mmbu.curation.manifest import DatasetManifest
from mmbu.curation.manifest.validate import ValidationReport, validate_files

DUPLICATES_FILE = "duplicates.json"  # in work/: the last duplicate check and the inputs it was made from
REVIEW_CHECKS = "review-checks.jsonl"  # in the data folder; `mmbu review ... --checks` reads it


@dataclass(frozen=True)
class BuildConfig:
    manifests_dir: Path
    data_dir: Path
    mirror: Path | None = None
    lock_path: Path | None = None  # default: manifests.lock beside the manifests folder
    repo_root: Path | None = None  # local sources are relative to it; default: the repository holding the manifests
    taxonomy_path: Path | None = None
    seed: int = 0
    jobs: int = 1
    executor: ExecutorName = "local"
    scheduler: str | None = None
    release_version: str = "0.1.0"
    duplicate_distance: int | None = DEFAULT_MAX_DISTANCE  # None: no duplicate check (see mmbu.build.duplicates)
    profile: str | None = None  # composition profile; None: the composition file's default (paper)
    composition_path: Path | None = None  # default: the bundled curation/data/composition.yaml
    allow_partial: bool = False  # replace the release on disk even by an empty or smaller one (release/guard.py)

    @property
    def composition(self) -> LoadedComposition:
        """The composition file (CompositionError naming file and field when it cannot be used)."""
        return _composition(self.composition_path)

    @property
    def profile_name(self) -> str:
        name = self.profile or self.composition.composition.default_profile
        self.composition.composition.profile(name)  # CompositionError for a profile the file does not define
        return name

    @property
    def release_dir(self) -> Path:
        return self.release_dir_of(self.profile_name)

    def release_dir_of(self, profile: str) -> Path:
        """DATA/release for the default profile, DATA/release-<profile> for another: no release mixes profiles, and
        a data folder keeps one release per profile from one set of fetched files."""
        default = self.composition.composition.default_profile
        return self.data_dir / ("release" if profile == default else f"release-{profile}")


@lru_cache(maxsize=4)
def _composition(path: Path | None) -> LoadedComposition:
    return load_composition(path)


class ReleaseProfileMismatch(ValueError):
    """The release folder holds a release of another composition profile (the build would replace it)."""


def check_release_profile(config: BuildConfig) -> None:
    """Refuse to replace a release of another profile (or of none: a release built before profiles held every row):
    its rows would be lost, or taken for this profile's. ReleaseProfileMismatch says what to do, in one sentence."""
    info_path = config.release_dir / "build_info.json"
    if not info_path.exists():
        return
    try:
        built = (json.loads(info_path.read_text(encoding="utf-8")).get("composition") or {}).get("profile")
    except (OSError, ValueError, AttributeError):
        return  # a torn build_info.json belongs to no finished release: the writer replaces the folder whole
    if built == config.profile_name:
        return
    kept = config.release_dir_of(built or "full")
    what = (f"a release of the `{built}` profile" if built
            else "a release built before composition profiles (every row, as `full` takes them)")
    raise ReleaseProfileMismatch(
        f"{config.release_dir} holds {what}, which this `{config.profile_name}` build would replace: move it to "
        f"{kept} (or remove it) and build again.")


@dataclass
class BuildReport:
    release_dir: Path
    manifest_errors: list[str] = field(default_factory=list)
    fetch: list[FetchResult] = field(default_factory=list)
    datasets: list[DatasetOutcome] = field(default_factory=list)
    release_written: bool = False
    release_kept: str | None = None  # why the release on disk was not replaced (an empty or smaller build)
    release_rows: dict[str, int] = field(default_factory=dict)
    exclusions: int = 0
    duplicates: DuplicateCheck = field(default_factory=DuplicateCheck)
    composition: dict[str, Any] = field(default_factory=dict)  # profile, version, seed, file (LoadedComposition.stamp)

    @property
    def failed(self) -> list[str]:
        fetch_failed = [f"{r.dataset_id}: {r.error}" for r in self.fetch if not r.ok]
        return self.manifest_errors + fetch_failed + [o.error or o.dataset_id for o in self.datasets if not o.ok]

    @property
    def exit_code(self) -> int:
        """0 all good; 1 something failed or was excluded (all of it is in the report)."""
        return 1 if self.failed or self.exclusions else 0


def manifest_paths(manifests_dir: Path) -> list[Path]:
    """The manifests a build reads: every *.yaml / *.yml directly in the folder, sorted."""
    return sorted(p for p in Path(manifests_dir).glob("*.y*ml") if p.is_file())


def lock_for(config: BuildConfig) -> LockFile:
    return LockFile(config.lock_path or Path(config.manifests_dir).parent / "manifests.lock")


def read_manifests(config: BuildConfig) -> ValidationReport:
    """Every manifest of the build, parsed and checked once: the fetch plan and `run_build` take this result,
    and fetch, the workers and the release use its parsed manifests (no step reads a manifest file again)."""
    taxonomy = cached_taxonomy(str(config.taxonomy_path) if config.taxonomy_path else None)
    # evidence is printed, not required: test and local manifests build; the catalogue's CI check requires it
    return validate_files(manifest_paths(Path(config.manifests_dir)), taxonomy, require_evidence=False)


def plan_build(config: BuildConfig, manifests: Mapping[Path, DatasetManifest] | None = None) -> FetchPlan:
    """The fetch plan of the build's manifests (printed before `run_build`; see `mmbu.build.fetch.plan`);
    `manifests`: the parsed ones (`read_manifests(config).manifests`), not read again."""
    manifests_dir = Path(config.manifests_dir)
    return plan_fetch(manifest_paths(manifests_dir), config.data_dir, mirror=config.mirror, lock=lock_for(config),
                      repo_root=config.repo_root or repository_root(manifests_dir), manifests=manifests)


def run_build(config: BuildConfig, progress: Callable[[str, int, int], None] | None = None,
              plan: FetchPlan | None = None, validation: ValidationReport | None = None) -> BuildReport:
    """Build `config.data_dir/release`; bad datasets and items are reported, never fatal to the rest.

    `validation` (default: `read_manifests(config)`) holds the manifests, parsed once. `plan` (default:
    `plan_build(config)`) decides which datasets are not fetched at all because their host does not answer:
    each fails with one sentence while the others build. Holds the data folder's lock for the whole build
    (DataFolderBusy when another build or fetch has it) and first removes the temporary files a killed build
    left behind. Takes the rows of `config.profile` (`mmbu.build.selection`) into `config.release_dir`; refuses
    (ReleaseProfileMismatch) when that folder holds a release of another profile.
    """
    with data_folder_lock(config.data_dir, "mmbu build"):
        check_release_profile(config)
        remove_stale_temporaries(config.data_dir)
        return _run_build(config, progress, plan, validation)


def _run_build(config: BuildConfig, progress: Callable[[str, int, int], None] | None,
               plan: FetchPlan | None, validation: ValidationReport | None) -> BuildReport:
    report = BuildReport(release_dir=config.release_dir)
    manifests_dir = Path(config.manifests_dir)
    # cached per process: forked local workers inherit it instead of parsing the YAML again
    taxonomy = cached_taxonomy(str(config.taxonomy_path) if config.taxonomy_path else None)

    validation = validation or read_manifests(config)
    paths = validation.files
    report.manifest_errors = [str(p) for p in validation.problems]
    good = [p for p in paths if p not in validation.invalid_files]
    manifests = {path: validation.manifests[path] for path in good}

    repo_root = config.repo_root or repository_root(manifests_dir)
    lock = lock_for(config)
    plan = plan or plan_build(config, manifests)
    blocked = {d.dataset_id: d.error or "" for d in plan.blocked}
    session = configured_session()  # $MMBU_HTTP_POLICIES, as `mmbu fetch` reads it
    composition, profile = config.composition.composition, config.profile_name
    report.composition = config.composition.stamp(profile)

    jobs: list[DatasetJob] = []

    def fetched_jobs() -> Iterator[DatasetJob]:
        """Fetch one dataset at a time in this process; each is handed to a worker as soon as it is on disk."""
        for path in largest_first(good, lock):
            result = fetch_manifest_file(path, config.data_dir, manifest=manifests[path], blocked=blocked,
                                         mirror=config.mirror, lock=lock, session=session, repo_root=repo_root)
            report.fetch.append(result)
            if result.ok and result.manifest:
                jobs.append(DatasetJob(manifest_path=Path(result.manifest).resolve(),
                                       data_dir=Path(config.data_dir).resolve(), taxonomy_path=config.taxonomy_path,
                                       seed=config.seed, manifest=manifests[path],
                                       composition=composition.rule_for(manifests[path].id, profile)))
                yield jobs[-1]

    outcomes: dict[int, DatasetOutcome] = {}
    for index, outcome in run_all(process_dataset, fetched_jobs(), executor=config.executor, jobs=config.jobs,
                                  scheduler=config.scheduler):
        if isinstance(outcome, Exception):  # the worker itself died (process_dataset never raises)
            outcome = DatasetOutcome(dataset_id=jobs[index].manifest_path.stem,
                                     manifest_path=str(jobs[index].manifest_path), ok=False,
                                     error=f"{jobs[index].manifest_path.stem}: "
                                           f"{'' if isinstance(outcome, WorkerDied) else 'the worker failed: '}{outcome}")
        outcomes[index] = outcome
        if progress:
            progress(outcome.dataset_id, len(outcomes), len(jobs))
    # reports and release rows in manifest order, whatever order the datasets were processed in
    report.fetch.sort(key=lambda result: result.manifest or result.dataset_id)
    report.datasets = sorted(outcomes.values(), key=lambda outcome: outcome.manifest_path)
    built = [o for o in report.datasets if o.ok and o.rows_path]
    rows_digests = {o.dataset_id: hash_file(Path(o.rows_path)) for o in built}  # read once for both checks
    if config.duplicate_distance is not None:
        report.duplicates = check_duplicates_saved({o.dataset_id: Path(o.rows_path) for o in built},
                                                   config.duplicate_distance,
                                                   Path(config.data_dir) / "work" / DUPLICATES_FILE, rows_digests,
                                                   run_jobs=_on_workers(config))

    _write_release_if_changed(config, report, taxonomy.content_hash, {m.id: m for m in manifests.values()},
                              rows_digests)
    write_json_atomic(Path(config.data_dir) / "build-report.json", _report_document(report))
    write_text_atomic(Path(config.data_dir) / REVIEW_CHECKS,
                      "".join(json.dumps(row, sort_keys=True) + "\n" for row in review_checks(report)))
    return report


def largest_first(manifest_paths: list[Path], lock: LockFile) -> list[Path]:
    """Datasets by the bytes pinned in the lock, largest first, so that the longest job does not start last
    and leave one worker alone at the end (unpinned datasets keep their order, after the pinned ones)."""
    def pinned_bytes(path: Path) -> int:
        entry = lock.document.datasets.get(path.stem)  # validation makes every manifest's id its file stem
        return sum(pin.size for pin in entry.files.values()) if entry else 0

    return sorted(manifest_paths, key=pinned_bytes, reverse=True)


def review_checks(report: BuildReport) -> list[dict[str, Any]]:
    """The round-3 automated checks that need fetched files (read by `mmbu review --checks`).

    One line per dataset and check: `fetches` (the files arrived and verified), `files-open` (every
    image converted) and `labels-complete` (the layout found no label outside the vocabulary, no label
    without its image and no orphan mask).
    """
    rows: list[dict[str, Any]] = []
    outcomes = {o.dataset_id: o for o in report.datasets}
    for fetch in report.fetch:
        rows.append({"dataset_id": fetch.dataset_id, "check": "fetches", "ok": fetch.ok,
                     "detail": fetch.error or f"{len(fetch.files)} file(s) from {fetch.fetched_from}"})
        outcome = outcomes.get(fetch.dataset_id)
        for check, stage in (("files-open", "convert"), ("labels-complete", "layout")):
            if outcome is None or not outcome.ok:
                reason = "the files were not fetched" if outcome is None else outcome.error
                rows.append({"dataset_id": fetch.dataset_id, "check": check, "ok": False, "detail": reason})
                continue
            problems = [e for e in outcome.exclusions if e["stage"] == stage]
            detail = (f"{len(problems)} item(s) dropped, e.g. {problems[0]['item']}: {problems[0]['reason']}"
                      if problems else "no problem found")
            rows.append({"dataset_id": fetch.dataset_id, "check": check, "ok": not problems, "detail": detail})
    return rows


def _dataset_exclusions(report: BuildReport) -> pd.DataFrame:
    rows = [e for outcome in report.datasets for e in outcome.exclusions]
    rows += [e.model_dump() for e in report.duplicates.exclusions]
    for message in report.manifest_errors:
        rows.append({"dataset_id": Path(message.split(":", 1)[0]).stem, "sample_id": None,
                     "item": message.split(":", 1)[0], "stage": "manifest", "reason": message})
    for result in report.fetch:
        if not result.ok:
            rows.append({"dataset_id": result.dataset_id, "sample_id": None, "item": result.manifest or "",
                         "stage": "fetch", "reason": result.error})
    for outcome in report.datasets:
        if not outcome.ok:
            rows.append({"dataset_id": outcome.dataset_id, "sample_id": None, "item": outcome.manifest_path,
                         "stage": "build", "reason": outcome.error})
    return pd.DataFrame(rows, columns=list(EXCLUSION_COLUMNS))


# Part of the release's input hash. Bump it when the release writer writes other files for the same rows
# (the package version does not change between development edits, and an unchanged hash keeps the old release).
RELEASE_FORMAT = 2


def _write_release_if_changed(config: BuildConfig, report: BuildReport, taxonomy_hash: str,
                              manifests_by_id: dict[str, DatasetManifest], rows_digests: dict[str, str]) -> None:
    built = [o for o in report.datasets if o.ok and o.rows_path]
    exclusions = _dataset_exclusions(report)
    report.exclusions = len(exclusions)
    stamp = report.composition
    inputs_hash = hash_json({
        "toolkit": toolkit_version(), "format": RELEASE_FORMAT, "version": config.release_version, "seed": config.seed,
        "taxonomy": taxonomy_hash, "composition": stamp,
        "rows": {o.dataset_id: rows_digests[o.dataset_id] for o in built},
        "manifests": {o.dataset_id: o.manifest_hash for o in built},  # hashed by the worker that parsed it
        "exclusions": exclusions.astype(object).where(exclusions.notna(), "").to_dict(orient="records"),
    })
    info_path = config.release_dir / "build_info.json"
    if info_path.exists() and (config.release_dir / "SHA256SUMS").exists():
        try:
            previous = json.loads(info_path.read_text(encoding="utf-8"))
        except ValueError:
            previous = {}
        if previous.get("inputs_hash") == inputs_hash:
            report.release_rows = previous.get("rows", {})
            return
    # imported here: the release writer pulls in `datasets` (about a second), which a no-op rebuild never needs
    from mmbu.build.release import collect_build_info, write_release
    from mmbu.build.release.guard import why_keep
    from mmbu.build.release.rows import RowsFiles

    build_info = collect_build_info(
        seed=config.seed, taxonomy_hash=taxonomy_hash, manifest_paths=[o.manifest_path for o in built],
        composition=stamp, extra={"inputs_hash": inputs_hash, "toolkit_version": toolkit_version(),
                                  "jobs": config.jobs, "executor": config.executor})
    manifests = [manifests_by_id[o.dataset_id] for o in built]
    # Each config is written by a worker that reads only its rows from the per-dataset files (less the
    # rows the duplicate check dropped): the configs are written in parallel, and no process holds the
    # rows of all of them.
    counts: dict[str, int] = {}
    for outcome in built:
        for task, count in outcome.rows_per_task.items():
            counts[task] = counts.get(task, 0) + count
    if not config.allow_partial and (keep := why_keep(config.release_dir, counts)) is not None:
        report.release_kept = keep
        return
    parts = {o.dataset_id: (o.rows_path, frozenset(report.duplicates.dropped_keys(o.dataset_id))) for o in built}
    rows_by_task = {task: RowsFiles(tuple(parts[o.dataset_id] for o in built if o.rows_per_task.get(task)), task, count)
                    for task, count in counts.items()}

    summary = write_release(rows_by_task, config.release_dir, manifests, build_info,
                            exclusions=exclusions, version=config.release_version, run_jobs=_on_workers(config))
    report.release_written = True
    report.release_rows = dict(summary.rows)
    report.exclusions += len(summary.exclusions)


def _on_workers(config: BuildConfig) -> RunJobs:
    """Run jobs on the build's workers, results in job order; a job that failed raises (the duplicate search of a
    task, a release config: nothing half-done is used)."""
    def run(function: Callable[[Any], Any], jobs: list[Any]) -> Iterator[Any]:
        results = dict(run_all(function, jobs, executor=config.executor, jobs=config.jobs, scheduler=config.scheduler))
        for index in range(len(jobs)):
            if isinstance(results[index], Exception):
                raise results[index]
            yield results[index]

    return run


def _report_document(report: BuildReport) -> dict[str, Any]:
    return {
        "release": str(report.release_dir),
        "release_written": report.release_written,
        "release_kept": report.release_kept,
        "release_rows": report.release_rows,
        "composition": report.composition,
        "failed": report.failed,
        "exclusions": report.exclusions,
        "fetch": [r.model_dump(mode="json") for r in report.fetch],
        "datasets": [asdict(o) | {"exclusions": len(o.exclusions)} for o in report.datasets],
        "duplicates": {"images_checked": report.duplicates.images_checked,
                       "images_dropped": len({(d.image_id, d.task) for d in report.duplicates.drops}),
                       "rows_dropped": len(report.duplicates.exclusions),
                       "comparisons": report.duplicates.search.comparisons,
                       "comparisons_skipped": report.duplicates.search.capped_comparisons,
                       "buckets_capped": report.duplicates.search.capped_buckets},
    }
