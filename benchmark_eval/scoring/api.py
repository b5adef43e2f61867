"""`run_score(ScoreConfig)`: score runs and write the artefacts from Python; `mmbu eval score` wraps it.

    from mmbu.benchmark_eval.scoring.api import ScoreConfig, run_score
    result = run_score(ScoreConfig(run_dirs=(Path("runs/qwen2.5-vl-7b"),), out=Path("scores.json")))
    result.report.scores, result.incomplete, result.written

`score_runs` (scores.py) is the step below it: load, score and aggregate without writing anything.
Unusable input raises `RunInputError`, one sentence naming the file or run.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from mmbu.benchmark_eval.scoring.output import write_record_outcomes, write_unless_empty
from mmbu.benchmark_eval.scoring.provenance import scoring_provenance
from mmbu.benchmark_eval.scoring.results import records
from mmbu.benchmark_eval.scoring.scores import ScoreOptions, ScoreReport, score_runs
from mmbu.core.cli import ExitCode
from mmbu.core.outputs import write_json


@dataclass(frozen=True, kw_only=True)
class ScoringConfig:
    """What scoring one or more runs needs (shared by `mmbu eval score` and `mmbu eval report`)."""

    run_dirs: tuple[Path, ...]  # RUNS_DIR/<model> each
    release_dir: Path | None = None  # default: the one named in each run's run.json
    by: tuple[str, ...] = ()  # metadata fields to break scores down by (modality, sub_modality, ...)
    cluster_by_image: bool = False  # resample images (image_sha256), not questions, in the bootstrap
    seed: int = 0  # bootstrap seed
    resamples: int = 1000  # bootstrap resamples (percentile 95 % interval)
    jobs: int = 1  # worker processes scoring runs in parallel (one run each)
    command_line: tuple[str, ...] | None = None  # recorded as provenance (secrets removed); default: this process's

    def provenance(self) -> dict:
        """What produced these scores: each run's release, versions, model and judge as reported, dates, commands."""
        return scoring_provenance(self.run_dirs, self.release_dir, self.command_line)

    @property
    def options(self) -> ScoreOptions:
        return ScoreOptions(resamples=self.resamples, seed=self.seed, cluster_by_image=self.cluster_by_image,
                            by=self.by)

    def score(self, progress: Callable[[str], None] | None = None) -> ScoreReport:
        """Load, score and aggregate the runs (`progress` is called with each run's path when it is scored)."""
        return score_runs(self.run_dirs, self.release_dir, self.options, jobs=self.jobs, progress=progress)


@dataclass(frozen=True, kw_only=True)
class ScoreConfig(ScoringConfig):
    """One `mmbu eval score`."""

    out: Path  # scores.json; breakdowns, paired comparisons, diagnostics and record outcomes go beside it


@dataclass
class ScoringResult:
    report: ScoreReport
    written: dict[str, Path] = field(default_factory=dict)  # artefact -> path

    @property
    def incomplete(self) -> list[str]:
        """What makes the scores incomplete: missing records, run errors and open answers without a verdict."""
        return incomplete(self.report)

    @property
    def exit_code(self) -> ExitCode:
        return ExitCode.ITEMS_FAILED if self.incomplete else ExitCode.OK


def side_files(out: Path) -> dict[str, Path]:
    """Where the artefacts beside ``scores.json`` go: ``<stem>.breakdowns.json`` and so on."""
    stem = out.with_suffix("") if out.suffix == ".json" else out
    paths = {name: stem.parent / f"{stem.name}.{name}.json"
             for name in ("breakdowns", "paired", "diagnostics", "overall", "provenance")}
    paths["records"] = stem.parent / f"{stem.name}.records.parquet"
    return paths


def run_score(config: ScoreConfig, progress: Callable[[str], None] | None = None) -> ScoringResult:
    """Score the runs and write scores.json and its side files."""
    report = config.score(progress)
    paths = side_files(config.out)
    written = {
        "scores": write_json(config.out, report.contract_records()),
        "breakdowns": write_unless_empty(paths["breakdowns"], records(report.breakdowns), write_json),
        "paired": write_unless_empty(paths["paired"], records(report.paired), write_json),
        "diagnostics": write_unless_empty(paths["diagnostics"], records(report.diagnostics), write_json),
        "overall": write_unless_empty(paths["overall"], records(report.overall), write_json),
        "provenance": write_json(paths["provenance"], config.provenance()),
        "records": write_record_outcomes(paths["records"], report.outcomes),
    }
    return ScoringResult(report, {name: path for name, path in written.items() if path is not None})


def incomplete(report: ScoreReport) -> list[str]:
    """What makes the scores incomplete: missing records, run errors and open records without a verdict."""
    messages = [f"{row.model} {row.task}/{row.form}/{row.template}: {row.missing} of {row.expected} "
                f"records are missing from the run file (a run cut short or a damaged copy); no F1 is reported for "
                f"it — re-run `mmbu eval run` to complete it" for row in report.incomplete]
    for item in report.diagnostics:
        where = f"{item.model} {item.task}/{item.form}/{item.template}"
        if item.judge_pending:
            messages.append(f"{where}: {item.judge_pending} open answers have no verdict — `mmbu eval judge` has not "
                            f"run on them; they are left out of F1 and counted in judge_errors")
        if item.judge_failed:
            messages.append(f"{where}: {item.judge_failed} open answers got no readable verdict from the judge "
                            f"(judge errors, left out of F1; re-run `mmbu eval judge` to retry them)")
        if item.run_errors:
            messages.append(f"{where}: {item.run_errors} records have no model answer (run errors, left out; "
                            f"re-run `mmbu eval run` to retry them)")
    return messages
