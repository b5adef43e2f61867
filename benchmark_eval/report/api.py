"""`run_report(ReportConfig)`: score runs and write the whole report from Python; `mmbu eval report` wraps it.

    from mmbu.benchmark_eval.report.api import ReportConfig, run_report
    result = run_report(ReportConfig(run_dirs=(Path("runs/a"), Path("runs/b")), out_dir=Path("report")))
    result.written   # report.md, scores.json/csv, overall.csv, deltas.csv, breakdowns, paired.csv, diagnostics.csv,
                     # provenance.json, plots (a table with no row is not written)

Unusable input raises `RunInputError`, one sentence naming the file or run.
"""
from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from mmbu.benchmark_eval.models.registry import RegistryError, default_registry
from mmbu.benchmark_eval.report.plots import all_plots
from mmbu.benchmark_eval.report.tables import markdown_report
from mmbu.benchmark_eval.scoring.api import ScoringConfig, ScoringResult
from mmbu.benchmark_eval.scoring.output import write_record_outcomes, write_unless_empty
from mmbu.benchmark_eval.scoring.provenance import csv_columns, scoring_provenance
from mmbu.benchmark_eval.scoring.results import records
from mmbu.benchmark_eval.scoring.scores import ScoreOptions, ScoreReport
from mmbu.core.files import write_text_atomic
from mmbu.core.outputs import write_csv, write_json
from mmbu.core.runs import RunFile


@dataclass(frozen=True, kw_only=True)
class ReportConfig(ScoringConfig):
    """One `mmbu eval report`: the scoring options, where the report goes and the heatmap's columns."""

    out_dir: Path
    heatmap_field: str = "sub_modality"  # metadata field of the heatmap columns (always broken down by)

    @property
    def options(self) -> ScoreOptions:
        fields = tuple(dict.fromkeys(("sub_modality", self.heatmap_field, *self.by)))
        return ScoreOptions(resamples=self.resamples, seed=self.seed, cluster_by_image=self.cluster_by_image,
                            by=fields)


def run_report(config: ReportConfig, progress: Callable[[str], None] | None = None) -> ScoringResult:
    """Score the runs and write every report artefact into `config.out_dir`."""
    report = config.score(progress)
    return ScoringResult(report, write_report(report, config.out_dir, config.run_dirs, config.options,
                                              config.heatmap_field, config.provenance()))


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
        path = Path(run_dir) / RunFile.JUDGE_AGREEMENT
        if path.exists():
            found.append({"run": Path(run_dir).name, **json.loads(path.read_text(encoding="utf-8"))})
    return found


def write_report(report: ScoreReport, out_dir: Path, run_dirs: tuple[Path, ...], options: ScoreOptions,
                 heatmap_field: str = "sub_modality", provenance: dict | None = None) -> dict[str, Path]:
    """Every report artefact into `out_dir`; returns {what: path}. A table with no row is not written (and one
    left by an earlier report into the same folder is removed); `provenance` (default: read from `run_dirs`)
    heads report.md, goes into provenance.json and into the columns of scores.csv."""
    out_dir.mkdir(parents=True, exist_ok=True)
    provenance = provenance if provenance is not None else scoring_provenance(run_dirs)
    scores = [{**item, **csv_columns(provenance, item["model"])} for item in report.score_records()]
    tables = {
        "scores.json": (report.contract_records(), write_json), "scores.csv": (scores, write_csv),
        "overall.csv": (records(report.overall), write_csv), "deltas.csv": (records(report.deltas), write_csv),
        "breakdowns.json": (records(report.breakdowns), write_json),
        "breakdowns.csv": (records(report.breakdowns), write_csv),
        "paired.csv": (records(report.paired), write_csv), "diagnostics.csv": (records(report.diagnostics), write_csv),
    }
    written = {name: write_unless_empty(out_dir / name, rows, writer) for name, (rows, writer) in tables.items()}
    written = {name: path for name, path in written.items() if path is not None}
    written["provenance.json"] = write_json(out_dir / "provenance.json", provenance)
    written["records.parquet"] = write_record_outcomes(out_dir / "records.parquet", report.outcomes)
    plots = all_plots(report.scores, report.deltas, report.outcomes, report, display_name, out_dir, heatmap_field)
    written.update({name: out_dir / name for name in plots.values()})
    clustering = "whole images (image_sha256)" if options.cluster_by_image else "questions"
    options_text = (f"Intervals: {options.resamples} percentile-bootstrap resamples of {clustering}, seed {options.seed}.")
    text = markdown_report(report, display_name, plots, judge_agreements(run_dirs), options_text, provenance)
    written["report.md"] = write_text_atomic(out_dir / "report.md", text)
    return written
