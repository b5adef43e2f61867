"""One-time builder of the offline Papers with Code index (run where the archived dump is available).

    python -m mmbu.curation.sources.pwc_build DUMP --revision SHA --out pwc-index.jsonl

DUMP is `pwc-archive/datasets` downloaded at a pinned revision (parquet, JSON, JSON.gz or JSONL).
"""
from __future__ import annotations

from pathlib import Path

import click

from mmbu.curation.sources.paperswithcode import build_index


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("dump", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--revision", required=True, help="The pinned revision (commit sha) of the dump.")
@click.option("--out", required=True, type=click.Path(dir_okay=False, path_type=Path), help="Index file to write.")
@click.option("--source", default="pwc-archive/datasets", show_default=True, help="Where the dump came from.")
def main(dump: Path, revision: str, out: Path, source: str) -> None:
    """Build the Papers with Code JSONL index from an archived datasets dump."""
    try:
        count = build_index(dump, out, revision, source)
    except (OSError, ValueError) as exc:
        raise click.ClickException(f"{dump}: cannot build the index ({exc})") from None
    click.echo(f"wrote {count} records to {out}")


if __name__ == "__main__":
    main()
