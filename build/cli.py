"""`mmbu build`: the whole build from manifests to `$MMBU_DATA/release/` (what `make dataset` and `make demo` run)."""
from __future__ import annotations

import contextlib
import os
from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from mmbu.build.data_lock import DataFolderBusy, DataFolderLayout, check_data_folders
from mmbu.build.duplicates import DEFAULT_MAX_DISTANCE
from mmbu.build.executors import ExecutorError
from mmbu.build.fetch import LockError
from mmbu.build.fetch.plan import plan_lines
from mmbu.build.fetch.unreachable import failure_lines
from mmbu.build.pipeline import (
    BuildConfig, BuildReport, ReleaseProfileMismatch, check_release_profile, manifest_paths, plan_build,
    read_manifests, run_build,
)
from mmbu.core.cli import InvalidInput
from mmbu.core.interrupt import on_interrupt
from mmbu.core.progress import PlainProgress, is_live, output_console
from mmbu.curation.composition import CompositionError
from mmbu.taxonomy import TaxonomyError


@click.command("build")
@click.option("--manifests", "manifests_dir", type=click.Path(path_type=Path), default=Path("manifests/datasets"),
              show_default=True, help="Folder of dataset manifests (*.yaml).")
@click.option("--data", "data_dir", type=click.Path(path_type=Path), default=None,
              help="Data folder: raw/, work/ and release/ go here. [default: $MMBU_DATA or ./data]")
@click.option("--mirror", type=click.Path(path_type=Path), default=None,
              help="Local mirror consulted before any network fetch. [default: $MMBU_MIRROR]")
@click.option("--lock", "lock_path", type=click.Path(path_type=Path), default=None,
              help="sha256 pins of fetched files. [default: manifests.lock beside the manifests folder]")
@click.option("--taxonomy", "taxonomy_path", type=click.Path(path_type=Path), default=None,
              help="Taxonomy YAML. [default: the bundled taxonomy]")
@click.option("--jobs", type=click.IntRange(min=1), default=1, show_default=True,
              help="Datasets processed in parallel (local processes).")
@click.option("--executor", type=click.Choice(["local", "dask"]), default="local", show_default=True)
@click.option("--scheduler", default=None, help="Dask scheduler address, e.g. tcp://10.0.0.5:8786 (with --executor dask).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of option order and distractors.")
@click.option("--duplicate-distance", type=click.IntRange(0, 47), default=DEFAULT_MAX_DISTANCE, show_default=True,
              help="Images whose perceptual hashes differ by at most this many bits of 256 are one image: one copy "
                   "per task stays (0: identical hashes only).")
@click.option("--keep-duplicates", is_flag=True, help="Skip the duplicate-image check.")
@click.option("--profile", default=None, metavar="paper|full|mini",
              help="Composition profile: how many rows each dataset gives each task (paper: the paper's scale; full: "
                   "every row; mini: a few rows of each, for a first model run). Its release is DATA/release for the "
                   "default profile, DATA/release-<profile> otherwise. [default: the composition file's, paper]")
@click.option("--composition", "composition_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Composition file (profiles, caps, seed). [default: the bundled curation/data/composition.yaml]")
@click.option("--allow-partial", is_flag=True,
              help="Replace the release on disk even when the new build has fewer rows (or none): offline or with a "
                   "host down, the release already there is otherwise kept.")
def build(manifests_dir: Path, data_dir: Path | None, mirror: Path | None, lock_path: Path | None,
          taxonomy_path: Path | None, jobs: int, executor: str, scheduler: str | None, seed: int,
          duplicate_distance: int, keep_duplicates: bool, profile: str | None, composition_path: Path | None,
          allow_partial: bool) -> None:
    """Build the benchmark release from the manifests: fetch → layout → convert → metadata → questions → release.

    Each step of each dataset is skipped when its inputs are unchanged, and an interrupted build
    resumes. A failing dataset or item is reported (build-report.json, release/exclusions.csv) and
    the rest is built. Exit 0 all good, 1 something was excluded or failed, 2 bad usage (also: the release folder
    holds a release of another composition profile).
    """
    from mmbu.build.release.build_info import created_at

    if not manifests_dir.is_dir():
        raise InvalidInput(f"--manifests {manifests_dir}: no such folder")
    if executor == "dask" and not scheduler:
        raise click.UsageError("--executor dask needs --scheduler ADDRESS")
    data_dir = data_dir or Path(os.environ.get("MMBU_DATA", "data"))
    mirror = mirror or (Path(os.environ["MMBU_MIRROR"]) if os.environ.get("MMBU_MIRROR") else None)
    config = BuildConfig(manifests_dir=manifests_dir, data_dir=data_dir, mirror=mirror, lock_path=lock_path,
                         taxonomy_path=taxonomy_path, seed=seed, jobs=jobs, executor=executor, scheduler=scheduler,
                         duplicate_distance=None if keep_duplicates else duplicate_distance, profile=profile,
                         composition_path=composition_path, allow_partial=allow_partial)
    try:  # the composition, the release folder and the release date checked before the plan asks any host
        check_release_profile(config)
        created_at()  # a SOURCE_DATE_EPOCH that is not a date stops the build now, not after hours of work
    except (CompositionError, ReleaseProfileMismatch, ValueError) as exc:
        raise InvalidInput(str(exc)) from None
    if not manifest_paths(manifests_dir):
        click.echo(f"{manifests_dir} holds no manifest (*.yaml) yet: nothing to build. `make demo` builds the "
                   "offline demo; manifests/README.md says how to add a dataset.")
        return
    try:
        check_data_folders(data_dir)
        validation = read_manifests(config)  # each manifest parsed once, for the plan and the build
        plan = plan_build(config, validation.manifests)
    except (LockError, TaxonomyError, DataFolderLayout) as exc:
        raise InvalidInput(str(exc)) from None
    click.echo("\n".join(plan_lines(plan, str(manifests_dir), with_errors=False)))
    console = output_console()
    built = {"done": 0, "total": len(plan.datasets)}
    on_interrupt(lambda: f"built {built['done']} of {built['total']} dataset(s); each finished step is kept "
                         f"(work/<id>/state.json) and the release is written only once all are done")
    try:
        with _build_progress(console, built) as advance:
            report = run_build(config, progress=advance, plan=plan, validation=validation)
    except (ExecutorError, TaxonomyError, LockError, DataFolderBusy, DataFolderLayout,
            ReleaseProfileMismatch) as exc:
        raise InvalidInput(str(exc)) from None
    except OSError as exc:  # a full disk or a read-only folder: `mmbu` says it in one sentence naming the folder
        exc.filename = exc.filename or str(data_dir)
        raise
    _print_summary(report, console)
    raise SystemExit(report.exit_code)


@contextlib.contextmanager
def _build_progress(console: Console, built: dict[str, int]):
    """The per-dataset progress callback: a rich bar on a terminal, plain lines elsewhere; `built` follows both."""
    if not is_live(console):
        with PlainProgress("build", unit="datasets/s") as plain:
            def line(dataset_id: str, done: int, total: int) -> None:
                built.update(done=done, total=total)
                plain.update(done, total, note=f"last: {dataset_id}")

            yield line
        return
    columns = (TextColumn("[bold]building"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.description}"),
               TimeElapsedColumn())
    with Progress(*columns, console=console, transient=True) as bar:
        task = bar.add_task("fetching", total=None)

        def advance(dataset_id: str, done: int, total: int) -> None:
            built.update(done=done, total=total)
            bar.update(task, total=total, completed=done, description=dataset_id)

        yield advance


def _print_summary(report: BuildReport, console: Console) -> None:
    if report.datasets:
        table = Table(title="datasets", show_lines=False)
        for column in ("dataset", "evidence", "steps run", "steps skipped", "rows", "excluded", "status"):
            table.add_column(column)
        for outcome in report.datasets:
            rows = ", ".join(f"{task.split('_')[0]} {n}" for task, n in outcome.rows_per_task.items())
            # values from manifests and datasets are text, never rich markup (`[/]` in one would end the build here)
            table.add_row(escape(outcome.dataset_id), escape(outcome.evidence), ",".join(outcome.ran) or "-",
                          ",".join(outcome.skipped) or "-", rows, str(len(outcome.exclusions)),
                          "ok" if outcome.ok else "[red]failed")
        console.print(table)
    for message in report.manifest_errors:
        console.print(f"[red]failed:[/] {escape(message)}")
    # one line per unreachable host naming its datasets (offline: one per host), one per other dataset not fetched
    for line in failure_lines(report.fetch, "build-report.json"):
        console.print(line, markup=False, highlight=False, soft_wrap=True)
    for outcome in report.datasets:
        if not outcome.ok:
            console.print(f"[red]failed:[/] {escape(outcome.error or outcome.dataset_id)}")
    if report.release_kept is not None:
        kept = "kept as it was" if (report.release_dir / "build_info.json").exists() else "not written"
        console.print(f"release {report.release_dir}: {kept}, since {report.release_kept}; build-report.json lists "
                      f"what failed. Run again when the hosts answer, or pass --allow-partial (make dataset "
                      f"ALLOW_PARTIAL=1) to write the partial release.", markup=False, highlight=False)
    if not report.datasets:
        console.print("no dataset was built; build-report.json lists why.", markup=False)
        return
    duplicates = report.duplicates
    if duplicates.drops:
        console.print(f"duplicates: {len({(d.image_id, d.task) for d in duplicates.drops})} image(s) of "
                      f"{duplicates.images_checked} dropped as copies of another ({len(duplicates.exclusions)} "
                      "row(s); stage `duplicates` in exclusions.csv)")
    if duplicates.search.capped_comparisons:
        console.print(f"[yellow]duplicates:[/] {duplicates.search.capped_comparisons} comparison(s) in "
                      f"{duplicates.search.capped_buckets} oversized hash bucket(s) were skipped; copies only they "
                      "would have linked may remain (build-report.json, duplicates)")
    if report.release_kept is not None:
        return
    if report.composition:
        console.print(_composition_line(report))
    written = "written" if report.release_written else "unchanged (inputs identical)"
    rows = ", ".join(f"{task} {count:,}" for task, count in report.release_rows.items()) or "none"
    console.print(f"release {report.release_dir}: {written}; rows per task: {rows}; "
                  f"{report.exclusions} item(s) excluded (see exclusions.csv and build-report.json)", markup=False)


def _composition_line(report: BuildReport) -> str:
    """`profile paper (composition version 1, seed 0): rows chosen of those available per task`."""
    stamp = report.composition
    head = f"profile {stamp['profile']} (composition version {stamp['version']}, seed {stamp['seed']})"
    chosen: dict[str, list[int]] = {}
    for outcome in report.datasets:
        for task, counts in outcome.selection.items():
            total = chosen.setdefault(task, [0, 0])
            total[0] += counts["chosen"]
            total[1] += counts["available"]
    if not chosen:
        return f"{head}: every row"
    return f"{head}: rows chosen before conversion " + ", ".join(
        f"{task} {taken:,} of {available:,}" for task, (taken, available) in sorted(chosen.items()))
