"""``mmbu eval report``: Markdown, CSV, JSON and PNG plots for one or more runs."""
from __future__ import annotations

import json
from pathlib import Path

import click

from ..models.registry import RegistryError, default_registry
from mmbu.core.cli import ExitCode, InvalidInput
from mmbu.core.files import write_text_atomic

from ..scoring.cli import problems, scored_with_progress, scoring_options, split_fields
from ..scoring.output import write_csv, write_json, write_record_outcomes
from ..scoring.rundir import RunInputError
from ..scoring.scores import ScoreOptions, ScoreReport
from .plots import all_plots
from .tables import markdown_report


def display_name(model: str) -> str:
    """The paper's name for a registered model (``Qwen2.5-VL-7B``), else the name as given."""
    try:
        entry = default_registry().find(model)
    except RegistryError:
        return model
    return entry.display_name if entry is not None else model


def judge_agreements(run_dirs: tuple[Path, ...]) -> list[dict]:
    found = []
    for run_dir in run_dirs:
        path = Path(run_dir) / "judge_agreement.json"
        if path.exists():
            found.append({"run": Path(run_dir).name, **json.loads(path.read_text(encoding="utf-8"))})
    return found


def write_report(report: ScoreReport, out_dir: Path, run_dirs: tuple[Path, ...], options: ScoreOptions,
                 heatmap_field: str = "sub_modality") -> dict[str, Path]:
    """Every report artefact into `out_dir`; returns {what: path}."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = {
        "scores.json": write_json(out_dir / "scores.json", report.contract_records()),
        "scores.csv": write_csv(out_dir / "scores.csv", report.scores),
        "deltas.csv": write_csv(out_dir / "deltas.csv", report.deltas),
        "breakdowns.json": write_json(out_dir / "breakdowns.json", report.breakdowns),
        "breakdowns.csv": write_csv(out_dir / "breakdowns.csv", report.breakdowns),
        "paired.csv": write_csv(out_dir / "paired.csv", report.paired),
        "diagnostics.csv": write_csv(out_dir / "diagnostics.csv", report.diagnostics),
        "records.parquet": write_record_outcomes(out_dir / "records.parquet", report.outcomes),
    }
    plots = all_plots(report.scores, report.deltas, report.outcomes, report, display_name, out_dir, heatmap_field)
    written.update({name: out_dir / name for name in plots.values()})
    clustering = "whole images (image_sha256)" if options.cluster_by_image else "questions"
    options_text = (f"Intervals: {options.resamples} percentile-bootstrap resamples of {clustering}, seed {options.seed}.")
    text = markdown_report(report, display_name, plots, judge_agreements(run_dirs), options_text)
    written["report.md"] = write_text_atomic(out_dir / "report.md", text)
    return written


@click.command("report")
@scoring_options(click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False, path_type=Path),
                              help="Report directory (report.md, CSV, JSON, PNG plots)."))
@click.option("--heatmap-field", default="sub_modality", show_default=True, help="Metadata field of the heatmap columns.")
def report(run_dirs: tuple[Path, ...], out_dir: Path, release: Path | None, by: tuple[str, ...], cluster_by_image: bool,
           seed: int, resamples: int, jobs: int, heatmap_field: str) -> None:
    """Write a report for one or more runs (RUNS_DIR/<model>): the paper's table
    (closed / open (Δ) per task, with the random baseline row), CIs, diagnostics,
    paired comparisons and plots. Exit 1 when some records could not be scored.
    """
    fields = split_fields(("sub_modality", heatmap_field, *by))
    options = ScoreOptions(resamples=resamples, seed=seed, cluster_by_image=cluster_by_image, by=fields)
    try:
        scored = scored_with_progress(run_dirs, release, options, jobs)
    except RunInputError as exc:
        raise InvalidInput(str(exc)) from None
    written = write_report(scored, out_dir, run_dirs, options, heatmap_field)
    for message in scored.warnings:
        click.echo(f"warning: {message}", err=True)
    issues = problems(scored)
    for message in issues:
        click.echo(f"incomplete: {message}", err=True)
    click.echo(f"wrote {len(written)} files into {out_dir}: {', '.join(sorted(written))}", err=True)
    if issues:
        raise SystemExit(ExitCode.ITEMS_FAILED)
