"""`mmbu eval`: run, judge, score and report. Sub-commands are imported on first use."""
from __future__ import annotations

import importlib

import click

COMMANDS = {
    "run": ("mmbu.benchmark_eval.runner.cli:run", "Ask a model every selected question; append run records."),
    "judge": ("mmbu.benchmark_eval.judge.cli:judge", "Judge open answers against the gold answers (cached)."),
    "score": ("mmbu.benchmark_eval.scoring.cli:score", "Micro-F1 with bootstrap CIs, deltas and baselines."),
    "report": ("mmbu.benchmark_eval.report.cli:report", "Markdown, CSV and plots for one or more runs."),
}


class _LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in COMMANDS:
            return None
        module_name, attribute = COMMANDS[name][0].split(":")
        return getattr(importlib.import_module(module_name), attribute)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        with formatter.section("Commands"):
            formatter.write_dl([(name, text) for name, (_, text) in COMMANDS.items()])


@click.group("eval", cls=_LazyGroup)
def eval_group() -> None:
    """Evaluate a VLM on a built release: run -> judge -> score -> report.

    Run records live in RUNS_DIR/<model>/ and are append-only; judge, score and report
    read them and never re-run the model.
    """
