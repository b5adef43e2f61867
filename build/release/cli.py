"""`mmbu release ...`: what is done with a built release (docs/architecture.md §3.1): `preview`, the static HTML
review sheet, and `push`, publishing it to a Hugging Face dataset repository."""
from __future__ import annotations

from pathlib import Path

import click

from mmbu.build.release.preview import DEFAULT_PER_DATASET, PreviewError, write_preview
from mmbu.core.cli import ExitCode, InvalidInput


@click.group("release")
def release() -> None:
    """Review a built release before it is published, and publish it."""


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


@release.command("push")
@click.argument("release_dir", metavar="RELEASE", type=click.Path(path_type=Path, file_okay=False, exists=True))
@click.option("--repo", "repo_id", required=True, metavar="OWNER/NAME", help="The Hugging Face dataset repository.")
@click.option("--revision", default="main", show_default=True, help="Branch to commit to (created when missing).")
@click.option("--private", is_flag=True, help="Create the repository private (an existing one keeps its visibility).")
@click.option("--token-env", default=None, metavar="VAR",
              help="Variable holding the Hub token (default: HF_TOKEN, else huggingface_hub's saved login).")
@click.option("--message", "commit_message", default=None, help="Commit message (default: release version and inputs).")
def push(release_dir: Path, repo_id: str, revision: str, private: bool, token_env: str | None,
         commit_message: str | None) -> None:
    """Upload RELEASE (README.md card, croissant.json, data/ shards, checksums) to a Hugging Face
    dataset repository as one commit, after checking it against its SHA256SUMS; the commit's
    sha goes into RELEASE/pushes.json. Evaluate that exact commit with
    `mmbu eval run --release hf://OWNER/NAME@SHA`. Endpoint: HF_ENDPOINT.
    Exit 0 pushed, 1 the Hub could not be reached or failed, 2 bad input or a refused token.
    """
    from mmbu.build.release.push import PushConfig, PushError, push_release

    if repo_id.count("/") != 1 or not all(repo_id.split("/")):
        raise click.UsageError(f"--repo {repo_id}: give the repository as OWNER/NAME")
    try:
        record = push_release(PushConfig(release_dir=release_dir, repo_id=repo_id, revision=revision,
                                         private=private, token_env=token_env, commit_message=commit_message))
    except PushError as exc:
        if exc.usage:
            raise InvalidInput(str(exc)) from None
        click.echo(f"Error: {exc}", err=True)
        raise SystemExit(ExitCode.ITEMS_FAILED) from None
    click.echo(f"pushed {release_dir} to {record['repo']}@{record['revision']}: commit {record['commit']} "
               f"({record['url']}); recorded in {release_dir / 'pushes.json'}")
    click.echo(f"evaluate exactly these files with: mmbu eval run --release hf://{record['repo']}@{record['commit']} ...")
