"""``mmbu eval report``: the command over `run_report(ReportConfig)` (report/api.py): Markdown, CSV, JSON and PNG
plots for one or more runs."""
from __future__ import annotations

from pathlib import Path

import click

from mmbu.benchmark_eval.report.api import ReportConfig, run_report
from mmbu.benchmark_eval.scoring.cli import print_incomplete, scored, scoring_options, split_fields


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
    config = ReportConfig(run_dirs=run_dirs, out_dir=out_dir, release_dir=release, by=split_fields(by),
                          cluster_by_image=cluster_by_image, seed=seed, resamples=resamples, jobs=jobs,
                          heatmap_field=heatmap_field)
    result = scored(run_report, config)
    print_incomplete(result)
    click.echo(f"wrote {len(result.written)} files into {out_dir}: {', '.join(sorted(result.written))}", err=True)
    raise SystemExit(result.exit_code)
