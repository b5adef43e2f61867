"""`mmbu manifests try ID`: a contributor's first fetch of one dataset, before the pull request.

The `manifests` group is curation's (`validate`, `schema`) with `try` added here, where the build's fetch, layouts and
questions are at hand (curation may not import the build)."""
from __future__ import annotations

from pathlib import Path

import click

from mmbu.core.cli import ExitCode, InvalidInput
from mmbu.curation.manifest.cli import DEFAULT_MANIFEST_DIR
from mmbu.curation.manifest.cli import manifests as curation_manifests
from mmbu.curation.manifest.hints import did_you_mean


@click.command("try")
@click.argument("dataset_id")
@click.option("--manifests", "manifests_dir", type=click.Path(file_okay=False, path_type=Path),
              default=DEFAULT_MANIFEST_DIR, show_default=True, help="The folder holding DATASET_ID.yaml.")
@click.option("--data", "data_dir", type=click.Path(file_okay=False, path_type=Path), envvar="MMBU_DATA",
              default=Path("data"), show_default=True, help="Data root: DATA/raw/<id>/, DATA/work/<id>/. [env MMBU_DATA]")
@click.option("--mirror", type=click.Path(file_okay=False, path_type=Path), envvar="MMBU_MIRROR", default=None,
              help="A local mirror consulted first: MIRROR/<id>/. [env MMBU_MIRROR]")
@click.option("--lock", "lock_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="The sha256 lock file. [default: manifests.lock next to the manifests folder]")
@click.option("--questions", "per_task", type=click.IntRange(0, 50), default=2, show_default=True,
              help="Questions shown per task.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Also draw the shown questions' images, with their boxes and masks, as PNGs in this folder.")
@click.option("--taxonomy", "taxonomy_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Taxonomy YAML. [default: the bundled taxonomy]")
def try_dataset(dataset_id: str, manifests_dir: Path, data_dir: Path, mirror: Path | None, lock_path: Path | None,
                per_task: int, out_dir: Path | None, taxonomy_path: Path | None) -> None:
    """Fetch one dataset, run its layout and build its questions, as `mmbu build` will.

    Prints what was fetched, the samples per label and split, the exclusions by reason and a few questions. When the
    layout finds no sample, or under half the count its evidence states, it shows the fetched tree's top levels and,
    per pattern of the layout, what it matched or the nearest fetched paths: mend the manifest and run it again
    (what is fetched and built is kept). New files are pinned in the lock, as `mmbu fetch` pins them.
    Exit 0 samples found, 1 the fetch or the build failed or the layout found no sample, 2 bad usage.
    """
    from mmbu.build.data_lock import DataFolderBusy, data_folder_lock
    from mmbu.build.fetch import LockError, LockFile, repository_root
    from mmbu.build.trial.render import draw_rows, report_lines, sampled_rows
    from mmbu.build.trial.run import try_dataset as run_trial
    from mmbu.curation.manifest import ManifestError, load_manifest

    path = manifests_dir / f"{dataset_id}.yaml"
    if not path.is_file():
        known = sorted(p.stem for p in manifests_dir.glob("*.yaml")) if manifests_dir.is_dir() else []
        raise InvalidInput(f"no manifest {path}{did_you_mean(dataset_id, known)}")
    try:
        manifest = load_manifest(path)
        lock = LockFile(lock_path or manifests_dir.parent / "manifests.lock")
    except (ManifestError, LockError) as exc:
        raise InvalidInput(" ".join(str(exc).split())) from None
    click.echo(f"trying {manifest.id} ({path})")
    try:
        with data_folder_lock(data_dir, "mmbu manifests try"):
            report = run_trial(path, manifest, data_dir, mirror=mirror if mirror and str(mirror) else None, lock=lock,
                               repo_root=repository_root(manifests_dir), taxonomy_path=taxonomy_path)
    except DataFolderBusy as exc:
        raise InvalidInput(str(exc)) from None
    click.echo("\n".join(report_lines(report, per_task)))
    if out_dir is not None and report.rows is not None and len(report.rows) and per_task:
        written = draw_rows(sampled_rows(report.rows, per_task), out_dir)
        click.echo(f"\ndrew {len(written)} question image(s) into {out_dir}")
    failed = report.fetch.status == "error" or report.samples == 0 or (report.outcome and not report.outcome.ok)
    raise SystemExit(ExitCode.ITEMS_FAILED if failed else ExitCode.OK)


manifests = click.Group(name="manifests", commands=[*curation_manifests.commands.values(), try_dataset],
                        help="Validate dataset manifests (manifests/datasets/*.yaml), export their JSON Schema, or try "
                             "one: fetch it, run its layout and show its questions.")
