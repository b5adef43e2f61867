"""`mmbu manifests validate|schema`: check dataset manifests, or export their JSON Schema for editors."""
from __future__ import annotations

import json
from pathlib import Path

import click

from mmbu.core.cli import ExitCode, InvalidInput
from mmbu.core.files import write_text_atomic
from mmbu.curation.manifest.model import DatasetManifest
from mmbu.curation.manifest.validate import find_manifest_files, validate_files
from mmbu.taxonomy.model import TaxonomyError, load_taxonomy

DEFAULT_MANIFEST_DIR = Path("manifests/datasets")
JSON_SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"


@click.group()
def manifests() -> None:
    """Validate dataset manifests (manifests/datasets/*.yaml) or export their JSON Schema."""


@manifests.command()
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option("--taxonomy", "taxonomy_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Taxonomy YAML the metadata terms must come from (default: the bundled one).")
def validate(paths: tuple[Path, ...], taxonomy_path: Path | None) -> None:
    """Check manifest files or directories (default: manifests/datasets) and report every error.

    Each error reads FILE: field.path: reason. Exit 0 when all are valid, 1 when some are invalid,
    2 when a path or the taxonomy cannot be read.
    """
    try:
        taxonomy = load_taxonomy(taxonomy_path)
        files = find_manifest_files(paths or (DEFAULT_MANIFEST_DIR,))
    except (TaxonomyError, FileNotFoundError) as exc:
        raise InvalidInput(str(exc)) from None
    if not files:
        click.echo(f"no manifest files (*.yaml, *.yml) in {', '.join(str(p) for p in paths or (DEFAULT_MANIFEST_DIR,))}; nothing to check.")
        return
    report = validate_files(files, taxonomy)
    for problem in report.problems:
        click.echo(str(problem), err=True)
    summary = f"{len(report.files)} manifest(s) checked"
    if report.ok:
        click.echo(f"{summary}: all valid.")
        return
    click.echo(f"{summary}: {len(report.invalid_files)} invalid, {len(report.problems)} error(s).", err=True)
    raise SystemExit(ExitCode.ITEMS_FAILED)


def manifest_json_schema() -> dict:
    """The JSON Schema of a manifest (what `manifests/manifest.schema.json` holds)."""
    schema = DatasetManifest.model_json_schema()
    return {"$schema": JSON_SCHEMA_DIALECT, **schema}


def render_json_schema() -> str:
    return json.dumps(manifest_json_schema(), indent=2, ensure_ascii=False) + "\n"


@manifests.command()
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the schema to this file (atomically) instead of standard output.")
def schema(out: Path | None) -> None:
    """Print or write the manifest JSON Schema (for editor completion; committed as manifests/manifest.schema.json)."""
    text = render_json_schema()
    if out is None:
        click.echo(text, nl=False)
        return
    write_text_atomic(out, text)
    click.echo(f"wrote {out}")
