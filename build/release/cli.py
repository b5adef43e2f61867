"""`mmbu release`: what can be done with a built release (publish it to the Hugging Face Hub)."""
from __future__ import annotations

from pathlib import Path

import click

from mmbu.core.cli import ExitCode, InvalidInput, LazyGroup

COMMANDS = {
    "push": ("mmbu.build.release.cli:push", "Publish a built release to a Hugging Face dataset repository."),
}


@click.group("release", cls=LazyGroup, lazy_commands=COMMANDS)
def release() -> None:
    """Work with a built release ($MMBU_DATA/release)."""


@click.command("push")
@click.argument("release_dir", type=click.Path(path_type=Path, file_okay=False, exists=True))
@click.option("--repo", "repo_id", required=True, metavar="OWNER/NAME", help="The Hugging Face dataset repository.")
@click.option("--revision", default="main", show_default=True, help="Branch to commit to (created when missing).")
@click.option("--private", is_flag=True, help="Create the repository private (an existing one keeps its visibility).")
@click.option("--token-env", default=None, metavar="VAR",
              help="Variable holding the Hub token (default: HF_TOKEN, else huggingface_hub's saved login).")
@click.option("--message", "commit_message", default=None, help="Commit message (default: release version and inputs).")
def push(release_dir: Path, repo_id: str, revision: str, private: bool, token_env: str | None,
         commit_message: str | None) -> None:
    """Upload RELEASE_DIR (README.md card, croissant.json, data/ shards, checksums) to a Hugging
    Face dataset repository as one commit, after checking it against its SHA256SUMS; the
    commit's sha goes into RELEASE_DIR/pushes.json. Evaluate that exact commit with
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
