"""`mmbu review`: the reviewer-file workflow between discovery and the accepted manifests."""
from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from mmbu.core.cli import ExitCode, InvalidInput
from mmbu.curation.review.agreement import agreement
from mmbu.curation.review.checks import load_build_results
from mmbu.curation.review.ledger import Ledger, load_ledger
from mmbu.curation.review.promotion import promote
from mmbu.curation.review.rules import ReviewRules, RulesError, load_rules
from mmbu.curation.review.trail import Trail, all_trails, funnel, stops, write_audit
from mmbu.taxonomy.model import TaxonomyError, load_taxonomy


@dataclass
class Workspace:
    ledger: Ledger
    rules: ReviewRules
    trails: list[Trail]
    datasets_dir: Path
    reviews_dir: Path
    problems: list[str]
    build_results: dict

    def retrace(self) -> list[Trail]:
        """Recompute the trails (after promotion wrote manifests)."""
        self.trails = all_trails(self.ledger, self.rules, self.datasets_dir, build_results=self.build_results)
        return self.trails


def workspace_options(command: Callable) -> Callable:
    """The folders every review sub-command reads."""
    options = [
        click.option("--reviews", "reviews_dir", default=Path("manifests/reviews"), show_default=True,
                     type=click.Path(file_okay=False, path_type=Path), help="Reviewer files and nominations.yaml."),
        click.option("--candidates", "candidates_dir", default=Path("manifests/candidates"), show_default=True,
                     type=click.Path(file_okay=False, path_type=Path), help="Discover output files (*.jsonl)."),
        click.option("--datasets", "datasets_dir", default=Path("manifests/datasets"), show_default=True,
                     type=click.Path(file_okay=False, path_type=Path), help="Accepted dataset manifests."),
        click.option("--checks", "checks_file", type=click.Path(dir_okay=False, path_type=Path),
                     help="Round-3 check results written by the build side (JSONL: dataset_id, check, ok, detail)."),
        click.option("--rules", "rules_file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
                     help="Round rules YAML (the bundled curation/data/review_rules.yaml by default)."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def open_workspace(reviews_dir: Path, candidates_dir: Path, datasets_dir: Path, checks_file: Path | None,
                   rules_file: Path | None) -> Workspace:
    try:
        rules = load_rules(rules_file) if rules_file else load_rules()
    except RulesError as exc:
        raise InvalidInput(str(exc)) from None
    ledger = load_ledger(reviews_dir, candidates_dir, rules)
    build_results, problems = load_build_results(checks_file)
    trails = all_trails(ledger, rules, datasets_dir, build_results=build_results)
    return Workspace(ledger, rules, trails, datasets_dir, reviews_dir, ledger.problems + problems, build_results)


def with_workspace(command: Callable) -> Callable:
    @workspace_options
    @functools.wraps(command)
    def wrapper(reviews_dir, candidates_dir, datasets_dir, checks_file, rules_file, **kwargs):
        space = open_workspace(reviews_dir, candidates_dir, datasets_dir, checks_file, rules_file)
        for problem in space.problems:
            click.echo(f"warning: {problem}", err=True)
        command(space, **kwargs)
        if space.problems:
            raise SystemExit(ExitCode.ITEMS_FAILED)

    return wrapper


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def review() -> None:
    """Reviewer files, consensus, agreement and promotion between the three curation rounds.

    Round 1: expert nominations (manifests/reviews/nominations.yaml). Round 2: several annotators check
    each candidate. Round 3: an expert accepts with a draft manifest and the automated checks pass; then
    `review promote` writes manifests/datasets/<id>.yaml. Rules: curation/data/review_rules.yaml.
    Exit 0 all good; 1 some files or items had problems (listed on stderr); 2 invalid input.
    """


@review.command()
@with_workspace
def queue(space: Workspace) -> None:
    """What awaits a reviewer: candidates pending in round 2 or 3, with what is missing."""
    table = Table("candidate", "title", "stage", "reviewers", "waiting for")
    pending = [t for t in space.trails if t.status == "pending" or (t.stage == "round 3" and t.status == "accepted")]
    for trail in pending:
        reviewers = ", ".join(trail.reviewers.get(trail.stage, [])) or "-"
        table.add_row(*map(escape, (trail.ref, trail.title[:50], trail.stage, reviewers, trail.reason)))
    Console().print(table)
    click.echo(f"{len(pending)} item(s) in the queue")


@review.command(name="agreement")
@click.option("--round", "round_", type=click.Choice(["2", "3"]), default="2", show_default=True)
@with_workspace
def agreement_command(space: Workspace, round_: str) -> None:
    """Inter-annotator agreement (Cohen's kappa for two reviewers, Fleiss' for more) on each question."""
    reviews = [r for r in space.ledger.reviews if r.round == int(round_)]
    table = Table("question", "method", "kappa", "items", "raters", "note")
    for question in ["decision", *space.rules.criteria]:
        result = agreement(reviews, question)
        kappa = "-" if result.kappa is None else f"{result.kappa:.3f}"
        table.add_row(*map(escape, (question, result.method, kappa, str(result.items), str(result.raters),
                                   result.note)))
    Console().print(table)


@review.command()
@click.option("--taxonomy", "taxonomy_path", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Taxonomy YAML for validating promoted manifests (the bundled one by default).")
@click.option("--audit", "audit_file", type=click.Path(dir_okay=False, path_type=Path),
              help="Audit trail to write (default REVIEWS/audit.jsonl).")
@with_workspace
def promote_command(space: Workspace, taxonomy_path: Path | None, audit_file: Path | None) -> None:
    """Write manifests/datasets/<id>.yaml for every candidate that passed round 3, then the audit trail."""
    try:
        taxonomy = load_taxonomy(taxonomy_path)
    except TaxonomyError as exc:
        raise InvalidInput(str(exc)) from None
    ready = [t for t in space.trails if t.stage == "round 3" and t.status == "accepted"]
    for trail in ready:
        result = promote(trail, space.ledger, taxonomy, space.datasets_dir)
        if result.path:
            click.echo(f"promoted {trail.ref} -> {result.path}")
        else:
            space.problems.append(result.problem or f"{trail.ref}: not promoted")
            click.echo(f"warning: {result.problem}", err=True)
    trails = space.retrace()
    write_audit(trails, audit_file or space.reviews_dir / "audit.jsonl")
    click.echo(f"{sum(t.status == 'promoted' for t in trails)} dataset(s) promoted in all; audit trail written")


review.add_command(promote_command, name="promote")


@review.command()
@click.option("--out", "audit_file", type=click.Path(dir_okay=False, path_type=Path),
              help="Where to write the audit trail (default REVIEWS/audit.jsonl).")
@with_workspace
def audit(space: Workspace, audit_file: Path | None) -> None:
    """Write the audit trail: for every dataset ever considered, where it stopped and why."""
    path = audit_file or space.reviews_dir / "audit.jsonl"
    write_audit(space.trails, path)
    click.echo(f"{len(space.trails)} dataset(s) in the audit trail {path}")


@review.command()
@with_workspace
def status(space: Workspace) -> None:
    """The funnel: nominated → candidates → after round 2 → after round 3 → promoted, then where the rest stopped."""
    rows = funnel(space.trails, space.ledger)
    table = Table("stage", "datasets")
    for stage, count in rows:
        table.add_row(escape(stage), str(count))
    console = Console()
    console.print(table)
    stopped = stops(space.trails)
    if stopped:
        why = Table("stopped at", "why", "datasets", title="not promoted: where each stopped and why")
        for stage, reason, count in stopped:
            why.add_row(escape(stage), escape(reason), str(count))
        console.print(why)
    # the paper's own shorthand: nominated → candidates → after round 2 → after round 3
    picked = dict(rows)
    click.echo(" → ".join(str(picked[name]) for name in ("nominated (round 1)", "candidates (nominated + discovered)",
                                                        "after round 2", "after round 3")))
