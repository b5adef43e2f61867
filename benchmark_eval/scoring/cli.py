"""``mmbu eval score``: micro-F1 with bootstrap CIs, closed−open deltas, baselines and breakdowns."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from mmbu.core.cli import ExitCode, InvalidInput
from mmbu.core.release import TASK_SHORT_TITLES

from .output import write_json, write_record_outcomes
from .rundir import RunInputError
from .scores import ScoreOptions, ScoreReport, score_runs


InvalidRunInput = InvalidInput  # re-export for work in flight


def side_files(out: Path) -> dict[str, Path]:
    """Where the artefacts beside ``scores.json`` go: ``<stem>.breakdowns.json`` and so on."""
    stem = out.with_suffix("") if out.suffix == ".json" else out
    paths = {name: stem.parent / f"{stem.name}.{name}.json" for name in ("breakdowns", "paired", "diagnostics")}
    paths["records"] = stem.parent / f"{stem.name}.records.parquet"
    return paths


def split_fields(values: tuple[str, ...]) -> tuple[str, ...]:
    """``--by modality --by sub_modality`` and ``--by modality,sub_modality`` both work."""
    return tuple(dict.fromkeys(part.strip() for value in values for part in value.split(",") if part.strip()))


def scored_with_progress(run_dirs: tuple[Path, ...], release: Path | None, options: ScoreOptions,
                         jobs: int) -> ScoreReport:
    """:func:`score_runs` behind a rich progress bar (one step per run, then the aggregates)."""
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task("scoring runs", total=len(run_dirs))
        return score_runs(run_dirs, release, options, jobs=jobs,
                          progress=lambda path: bar.update(task, advance=1, description=(
                              "bootstrapping" if bar.tasks[task].completed + 1 >= len(run_dirs)
                              else f"scored {Path(path).name}")))


def problems(report: ScoreReport) -> list[str]:
    """What makes the scores incomplete: run errors and open records without a verdict."""
    messages = []
    for item in report.diagnostics:
        where = f"{item['model']} {item['task']}/{item['form']}/{item['template']}"
        if item["judge_pending"]:
            messages.append(f"{where}: {item['judge_pending']} open answers have no verdict — `mmbu eval judge` has not "
                            f"run on them; they are left out of F1 and counted in judge_errors")
        if item["judge_failed"]:
            messages.append(f"{where}: {item['judge_failed']} open answers got no readable verdict from the judge "
                            f"(judge errors, left out of F1; re-run `mmbu eval judge` to retry them)")
        if item["run_errors"]:
            messages.append(f"{where}: {item['run_errors']} records have no model answer (run errors, left out; "
                            f"re-run `mmbu eval run` to retry them)")
    return messages


TASK_SHORT = TASK_SHORT_TITLES  # re-export for work in flight


def summary_table(report: ScoreReport) -> Table:
    table = Table(title="micro-F1 with 95% bootstrap interval", show_lines=False)
    for column in ("model", "task", "form", "template", "n", "F1", "95% CI", "random", "parse fail", "judge err"):
        table.add_column(column, no_wrap=True, overflow="ellipsis", max_width=28 if column == "model" else None,
                         justify="left" if column in ("model", "task", "form", "template") else "right")
    for item in report.scores:
        f1 = "—" if item["f1"] is None or item["n"] == 0 else f"{item['f1']:.3f}"
        ci = "—" if item["ci_low"] is None else f"{item['ci_low']:.3f}–{item['ci_high']:.3f}"
        random = "—" if item["random_baseline"] is None else f"{item['random_baseline']:.3f}"
        table.add_row(item["model"], TASK_SHORT_TITLES.get(item["task"], item["task"]), item["form"], item["template"],
                      str(item["n"]), f1, ci, random, str(item["parse_failures"]), str(item["judge_errors"]))
    return table


def scoring_options(out_option: Callable) -> Callable:
    """The options `score` and `report` share: run directories, release, breakdowns, bootstrap."""
    def decorate(command: Callable) -> Callable:
        for option in reversed((
            click.argument("run_dirs", nargs=-1, required=True, type=click.Path(path_type=Path)),
            out_option,
            click.option("--release", type=click.Path(file_okay=False, path_type=Path), default=None,
                         help="Release directory (default: the one named in each run's run.json)."),
            click.option("--by", "by", multiple=True, metavar="FIELD",
                         help="Break scores down by a metadata field (modality, sub_modality, domain, ...); repeatable."),
            click.option("--cluster-by-image", is_flag=True,
                         help="Resample images (image_sha256), not questions, in the bootstrap."),
            click.option("--seed", default=0, show_default=True, type=int, help="Bootstrap seed."),
            click.option("--resamples", default=1000, show_default=True, type=click.IntRange(min=1),
                         help="Bootstrap resamples (percentile 95% interval)."),
            click.option("--jobs", type=click.IntRange(min=1), default=1, show_default=True,
                         help="Worker processes scoring runs in parallel (one run each); helps on idle cores."),
        )):
            command = option(command)
        return command
    return decorate


@click.command("score")
@scoring_options(click.option("--out", "out", required=True, type=click.Path(dir_okay=False, path_type=Path),
                              help="scores.json to write (breakdowns, paired comparisons and diagnostics go beside it)."))
def score(run_dirs: tuple[Path, ...], out: Path, release: Path | None, by: tuple[str, ...], cluster_by_image: bool,
          seed: int, resamples: int, jobs: int) -> None:
    """Score one or more runs (RUNS_DIR/<model>): micro-F1, CIs, deltas, baselines.

    \b
    F1 = 2·ΣTP / (2·ΣTP + ΣFP + ΣFN); for single-answer closed questions this is
    accuracy (an unparseable answer is one FP and one FN). Open answers are scored by
    the verdicts of `mmbu eval judge`; without one they are left out and counted as
    judge errors. Exit 1 when some records could not be scored (run errors, judge
    errors); 2 for unusable input.
    """
    options = ScoreOptions(resamples=resamples, seed=seed, cluster_by_image=cluster_by_image, by=split_fields(by))
    try:
        report = scored_with_progress(run_dirs, release, options, jobs)
    except RunInputError as exc:
        raise InvalidInput(str(exc)) from None
    write_json(out, report.contract_records())
    paths = side_files(out)
    write_json(paths["breakdowns"], report.breakdowns)
    write_json(paths["paired"], report.paired)
    write_json(paths["diagnostics"], report.diagnostics)
    write_record_outcomes(paths["records"], report.outcomes)
    console = Console()
    if not console.is_terminal:
        console = Console(width=200)  # a pipe or CI log gets the whole table, not one squeezed to 80 columns
    console.print(summary_table(report))
    # plain lines (not rich) so messages are never re-wrapped and stay greppable
    for message in report.warnings:
        click.echo(f"warning: {message}", err=True)
    issues = problems(report)
    for message in issues:
        click.echo(f"incomplete: {message}", err=True)
    click.echo(f"wrote {out} ({len(report.scores)} scores, {len(report.deltas)} deltas) and "
               f"{', '.join(p.name for p in paths.values())}", err=True)
    if issues:
        raise SystemExit(ExitCode.ITEMS_FAILED)
