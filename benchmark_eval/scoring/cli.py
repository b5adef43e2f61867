"""``mmbu eval score``: the command over `run_score(ScoreConfig)` (scoring/api.py): micro-F1 with bootstrap CIs,
closed−open deltas, baselines and breakdowns."""
from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from mmbu.benchmark_eval.rundir import RunInputError
from mmbu.benchmark_eval.scoring.api import ScoreConfig, ScoringConfig, ScoringResult, run_score
from mmbu.benchmark_eval.scoring.scores import ScoreReport
from mmbu.core.cli import InvalidInput
from mmbu.core.interrupt import on_interrupt
from mmbu.core.progress import PlainProgress, is_live, output_console
from mmbu.core.release import TASK_SHORT_TITLES


def split_fields(values: tuple[str, ...]) -> tuple[str, ...]:
    """``--by modality --by sub_modality`` and ``--by modality,sub_modality`` both work."""
    return tuple(dict.fromkeys(part.strip() for value in values for part in value.split(",") if part.strip()))


@contextmanager
def scoring_bar(runs: int) -> Iterator[Callable[[str], None]]:
    """A rich progress bar over the scoring of `runs` runs, then the aggregates (plain lines when the output is not a
    terminal); yields the progress callback."""
    console = Console(stderr=True)
    scored_runs: list[str] = []
    on_interrupt(lambda: f"scored {len(scored_runs)} of {runs} run(s); nothing is written before all are scored")

    def scored_one(path: str) -> str:
        """Count the run just scored; what the bar or line says next (the bootstrap follows the last run)."""
        scored_runs.append(path)
        return "bootstrapping" if len(scored_runs) >= runs else f"scored {Path(path).name}"

    if not is_live(console):
        with PlainProgress("scoring runs", unit="runs/s") as plain:
            def line(path: str) -> None:
                note = scored_one(path)
                plain.update(len(scored_runs), runs, note=note, force=True)

            plain.update(0, runs, force=True)
            yield line
        return
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, transient=True) as bar:
        task = bar.add_task("scoring runs", total=runs)

        def advance(path: str) -> None:
            bar.update(task, advance=1, description=scored_one(path))

        yield advance


def scored(run: Callable[..., ScoringResult], config: ScoringConfig) -> ScoringResult:
    """`run(config, progress)` behind the bar, with unusable input as exit 2."""
    try:
        with scoring_bar(len(config.run_dirs)) as progress:
            return run(config, progress)
    except RunInputError as exc:
        raise InvalidInput(str(exc)) from None


def print_incomplete(result: ScoringResult) -> None:
    """Warnings and what makes the scores incomplete, as plain stderr lines (never re-wrapped, greppable)."""
    for message in result.report.warnings:
        click.echo(f"warning: {message}", err=True)
    for message in result.incomplete:
        click.echo(f"incomplete: {message}", err=True)




def summary_table(report: ScoreReport, *, fit_terminal: bool = True) -> Table:
    """The scores as a table; on a terminal a long model name is cut to fit (`fit_terminal`), never in a file."""
    table = Table(title="micro-F1 with 95% bootstrap interval", show_lines=False)
    assisted = any(item.assisted_f1 is not None for item in report.scores)
    columns = ("model", "task", "form", "template", "n", "F1", "95% CI", *(("assisted F1",) if assisted else ()),
               "random", "parse fail", "judge err")
    for column in columns:
        table.add_column(column, no_wrap=True, overflow="ellipsis" if fit_terminal else "fold",
                         max_width=28 if column == "model" and fit_terminal else None,
                         justify="left" if column in ("model", "task", "form", "template") else "right")
    for item in report.scores:
        f1 = "—" if item.f1 is None or item.n == 0 else f"{item.f1:.3f}"
        ci = "—" if item.ci_low is None else f"{item.ci_low:.3f}–{item.ci_high:.3f}"
        random = "—" if item.random_baseline is None else f"{item.random_baseline:.3f}"
        extra = ("—" if item.assisted_f1 is None else f"{item.assisted_f1:.3f}",) if assisted else ()
        table.add_row(item.model, TASK_SHORT_TITLES.get(item.task, item.task), item.form, item.template,
                      str(item.n), f1, ci, *extra, random, str(item.parse_failures), str(item.judge_errors))
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


def scores_file(_ctx: click.Context, _param: click.Parameter, value: str) -> Path:
    """`--out scores/` or an existing folder means `scores.json` inside it: a trailing separator names a folder, and
    writing a file called `scores` there would surprise the user."""
    if value.endswith(("/", os.sep)) or Path(value).is_dir():
        return Path(value) / "scores.json"
    return Path(value)


@click.command("score")
@scoring_options(click.option("--out", "out", required=True, type=str, callback=scores_file,
                              help="scores.json to write, or a folder to write scores.json into (breakdowns, paired "
                                   "comparisons and diagnostics go beside it)."))
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
    config = ScoreConfig(run_dirs=run_dirs, out=out, release_dir=release, by=split_fields(by),
                         cluster_by_image=cluster_by_image, seed=seed, resamples=resamples, jobs=jobs)
    result = scored(run_score, config)
    console = output_console(stderr=False)  # a pipe or CI log gets the whole table, not one squeezed to 80 columns
    console.print(summary_table(result.report, fit_terminal=console.is_terminal))
    print_incomplete(result)
    click.echo(f"wrote {out} ({len(result.report.scores)} scores, {len(result.report.deltas)} deltas) and "
               f"{', '.join(p.name for name, p in result.written.items() if name != 'scores')}", err=True)
    raise SystemExit(result.exit_code)
