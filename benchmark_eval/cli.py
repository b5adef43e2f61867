"""`mmbu eval`: run, judge, score and report. Sub-commands are imported on first use."""
from __future__ import annotations

import click

from mmbu.core.cli import LazyGroup

COMMANDS = {
    "run": ("mmbu.benchmark_eval.runner.cli:run", "Ask a model every selected question; append run records."),
    "judge": ("mmbu.benchmark_eval.judge.cli:judge", "Judge open answers against the gold answers (cached)."),
    "score": ("mmbu.benchmark_eval.scoring.cli:score", "Micro-F1 with bootstrap CIs, deltas and baselines."),
    "report": ("mmbu.benchmark_eval.report.cli:report", "Markdown, CSV and plots for one or more runs."),
    "models": ("mmbu.benchmark_eval.models.cli:models", "The model registry: ids, aliases, box conventions, resize rules."),
    "serve-stub": ("mmbu.benchmark_eval.stub_cli:serve_stub",
                   "A stand-in OpenAI-compatible model and judge server for a dry run without a GPU."),
}


@click.group("eval", cls=LazyGroup, lazy_commands=COMMANDS)
def eval_group() -> None:
    """Evaluate a VLM on a built release: run -> judge -> score -> report.

    Run records live in RUNS_DIR/<model>/ and are append-only; judge, score and report
    read them and never re-run the model.
    """
