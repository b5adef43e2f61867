"""`mmbu catalogue`: the catalogue's coverage against the taxonomy and the paper, printed and written."""
from __future__ import annotations

from pathlib import Path

import click

from mmbu.core.bounded_read import read_json_file
from mmbu.core.cli import ExitCode, InvalidInput
from mmbu.curation.catalogue.coverage import Coverage, catalogue_coverage
from mmbu.curation.catalogue.report import to_markdown, write_report
from mmbu.curation.composition import CompositionError, load_composition
from mmbu.taxonomy import TaxonomyError, load_taxonomy


@click.command("catalogue")
@click.option("--manifests", "manifests_dir", type=click.Path(path_type=Path), default=Path("manifests/datasets"),
              show_default=True, help="The catalogue: a folder of dataset manifests.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Write catalogue.md, catalogue.json and catalogue.png here.")
@click.option("--compare", "base_json", type=click.Path(exists=True, path_type=Path), default=None,
              help="A catalogue.json written before (e.g. from the base branch): report what changed against it.")
@click.option("--summary", "summary_file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also append the Markdown to this file (CI: $GITHUB_STEP_SUMMARY).")
@click.option("--taxonomy", "taxonomy_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Taxonomy YAML. [default: the bundled taxonomy]")
@click.option("--composition", "composition_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Composition file whose profiles' rows are projected. [default: the bundled composition.yaml]")
@click.option("--quiet", is_flag=True, help="Print nothing; only write the files.")
def catalogue(manifests_dir: Path, out_dir: Path | None, base_json: Path | None, summary_file: Path | None,
              taxonomy_path: Path | None, composition_path: Path | None, quiet: bool) -> None:
    """Coverage of the catalogue: datasets and expected samples per modality and sub-modality (gaps named),
    per source kind against the paper's 250 classification / 84 segmentation / 76 detection sources, per
    benchmark task, host, licence and evidence level; the rows each composition profile (paper, full, mini)
    yields per task, modality and dataset, today and at the paper's 410 datasets, and their distinct topics.

    Exit 0, 1 when some manifests could not be read (listed, not counted), 2 bad usage.
    """
    if not manifests_dir.is_dir():
        raise InvalidInput(f"--manifests {manifests_dir}: no such folder")
    try:
        coverage = catalogue_coverage(manifests_dir, load_taxonomy(taxonomy_path),
                                      load_composition(composition_path).composition)
    except (TaxonomyError, CompositionError) as exc:
        raise InvalidInput(str(exc)) from None
    compare = None
    if base_json is not None:
        try:  # a regular file of bounded size and nesting: not /dev/zero, a FIFO or JSON nested a million deep
            compare = Coverage.model_validate(read_json_file(base_json))
        except ValueError as exc:
            raise InvalidInput(f"--compare {base_json}: not a catalogue.json ({str(exc).splitlines()[0]})") from None
    text = to_markdown(coverage, compare)
    if not quiet:
        click.echo(text, nl=False)
    if out_dir is not None:
        paths = write_report(coverage, out_dir, compare)
        if not quiet:
            click.echo(f"wrote {', '.join(str(p) for p in paths.values())}", err=True)
    if summary_file is not None:
        with summary_file.open("a", encoding="utf-8") as handle:
            handle.write(text)
    raise SystemExit(ExitCode.ITEMS_FAILED if coverage.unreadable else ExitCode.OK)
