"""The `mmbu` command: mounts each stage's own sub-commands, nothing else.

Sub-commands are imported only when used, so `mmbu --help` stays fast and a broken optional
stack (say, a missing GPU library) cannot take down unrelated commands.
"""
from __future__ import annotations

import sys

import click

from mmbu.core.cli import ExitCode, InvalidInput, LazyGroup, describe_disk_fault

# name -> (module:attribute, one-line help). The help text lives here so listing commands
# does not import every stage.
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "taxonomy": ("mmbu.taxonomy.cli:taxonomy", "Validate or show the expert taxonomy."),
    "manifests": ("mmbu.build.trial.cli:manifests",
                  "Validate dataset manifests, export their JSON Schema, or try one: fetch, layout, questions."),
    "discover": ("mmbu.curation.agent.cli:discover", "Search Zenodo, Hugging Face, Kaggle and Papers with Code for candidates."),
    "review": ("mmbu.curation.review.cli:review", "Reviewer manifests, consensus and promotion between curation rounds."),
    "catalogue": ("mmbu.curation.catalogue.cli:catalogue", "Coverage of the catalogue against the taxonomy and the paper."),
    "fetch": ("mmbu.build.fetch.cli:fetch", "Download every manifest's files into $MMBU_DATA/raw/<id>/."),
    "convert": ("mmbu.build.convert.cli:convert", "Convert DICOM, NIfTI, whole-slide, OME-TIFF and raster images to PNG."),
    "build": ("mmbu.build.cli:build", "Build the benchmark release from the manifests."),
    "release": ("mmbu.build.release.cli:release", "Review a built release (static HTML review sheet)."),
    "eval": ("mmbu.benchmark_eval.cli:eval_group", "Run, judge, score and report VLM evaluations on a release."),
}




def _print_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if not value or ctx.resilient_parsing:
        return
    from mmbu.core.version import toolkit_version

    click.echo(f"mmbu, version {toolkit_version()}")
    ctx.exit()


@click.group(cls=LazyGroup, lazy_commands=SUBCOMMANDS, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--version", is_flag=True, expose_value=False, is_eager=True, callback=_print_version,
              help="Show the version and exit.")
def cli() -> None:
    """MMBU toolkit: rebuild the benchmark from public datasets and evaluate VLMs on it.

    Exit codes: 0 all good; 1 the job ran but some items failed (see its report);
    2 bad usage or invalid input.
    """
    from mmbu.core.budget import from_environment

    try:  # the MMBU_MAX_* limits every reader obeys: a bad one is one sentence before anything runs
        from_environment()
    except ValueError as error:
        raise InvalidInput(str(error)) from None


def main() -> None:
    try:
        cli(prog_name="mmbu")
    except OSError as error:  # a full disk, a read-only folder, a file in the way: one sentence, no traceback
        message = describe_disk_fault(error)
        if message is None:
            raise
        click.echo(f"mmbu: {message}", err=True)
        sys.exit(ExitCode.INVALID_INPUT)
