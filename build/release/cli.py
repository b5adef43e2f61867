"""`mmbu release ...`: what is done with a built release (DESIGN §3.1): `preview`, the static HTML review sheet."""
from __future__ import annotations

from pathlib import Path

import click

from mmbu.build.release.preview import DEFAULT_PER_DATASET, PreviewError, write_preview
from mmbu.core.cli import ExitCode, InvalidInput


@click.group("release")
def release() -> None:
    """Review a built release before it is published."""


@release.command("preview")
@click.argument("release_dir", metavar="RELEASE", type=click.Path(path_type=Path))
@click.option("--out", "out_dir", type=click.Path(path_type=Path), required=True,
              help="Folder for index.html and its images (replaced whole; new, empty or an earlier sheet).")
@click.option("--per-dataset", type=click.IntRange(min=1), default=DEFAULT_PER_DATASET, show_default=True,
              help="Rows sampled per dataset and task.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the sample: the same seed, the same rows.")
def preview(release_dir: Path, out_dir: Path, per_dataset: int, seed: int) -> None:
    """Write a static HTML review sheet of sampled rows of RELEASE: each image as the model receives it (with its box
    or mask outline; closed detection's options drawn in their colours and letters), the questions, the options, the
    gold answer and the metadata. Open OUT/index.html in a browser; no server is needed.

    Exit 0 all rows drawn, 1 some rows could not be drawn (listed on the page), 2 no release at RELEASE or an
    unusable --out.
    """
    try:
        report = write_preview(release_dir, out_dir, per_dataset=per_dataset, seed=seed)
    except PreviewError as exc:
        raise InvalidInput(str(exc)) from None
    click.echo(f"review sheet: {report.page} ({report.rows} row(s))")
    for failure in report.failures:
        click.echo(failure, err=True)
    if report.failures:
        raise SystemExit(ExitCode.ITEMS_FAILED)
