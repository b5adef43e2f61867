"""`mmbu fetch`: get every manifest's files into $MMBU_DATA/raw/<id>/ (thin layer over fetch_all)."""
from __future__ import annotations

from pathlib import Path

import click

from mmbu.build.data_lock import DataFolderBusy, DataFolderLayout, check_data_folders, data_folder_lock
from mmbu.build.fetch.fetcher import fetch_all, repository_root, write_report
from mmbu.build.fetch.lockfile import LockError, LockFile
from mmbu.build.fetch.model import FetchResult
from mmbu.build.fetch.plan import plan_fetch, plan_lines, probing_session
from mmbu.build.fetch.progress import PlainFetchProgress, RichFetchProgress
from mmbu.build.fetch.unreachable import UNREACHABLE, failure_lines
from mmbu.core.cli import ExitCode, InvalidInput
from mmbu.core.interrupt import on_interrupt
from mmbu.core.progress import is_live, output_console
from mmbu.curation.catalogue.composition import composition_lines
from mmbu.curation.http import DEFAULT_POLICY, PoliteSession, configured_policies


def _manifest_paths(manifests: Path) -> list[Path]:
    if manifests.is_file():
        return [manifests]
    if not manifests.is_dir():
        raise InvalidInput(f"--manifests {manifests}: no such file or directory")
    try:
        paths = sorted(p for p in manifests.iterdir() if p.suffix in (".yaml", ".yml") and p.is_file())
    except OSError as exc:
        raise InvalidInput(f"--manifests {manifests}: cannot read the directory ({exc.strerror})") from None
    return paths


def _describe(result: FetchResult) -> str:
    if result.status == "error":
        return f"✗ dataset {result.dataset_id}: {result.error}"
    size = f"{result.bytes / 1e6:.1f} MB" if result.bytes >= 1e5 else f"{result.bytes} bytes"
    state = "already complete" if result.status == "up_to_date" else f"fetched from {result.fetched_from}"
    pinned = f", pinned {len(result.pinned)} new sha256" if result.pinned else ""
    return f"✓ {result.dataset_id}: {state} ({len(result.files)} files, {size}{pinned})"


@click.command("fetch")
@click.option("--manifests", "manifests", type=click.Path(path_type=Path), default=Path("manifests/datasets"),
              show_default=True, help="A manifests folder (every *.yaml in it) or one manifest file.")
@click.option("--data", "data_dir", type=click.Path(file_okay=False, path_type=Path), envvar="MMBU_DATA",
              default=Path("data"), show_default=True, help="Data root; files go to DATA/raw/<id>/. [env MMBU_DATA]")
@click.option("--mirror", type=click.Path(file_okay=False, path_type=Path), envvar="MMBU_MIRROR", default=None,
              help="A local mirror consulted first: MIRROR/<id>/ laid out like raw/<id>/. [env MMBU_MIRROR]")
@click.option("--lock", "lock_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="The sha256 lock file. [default: manifests.lock next to the manifests folder]")
@click.option("--report", "report_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="JSON-lines report, one line per dataset. [default: DATA/reports/fetch-report.jsonl]")
@click.option("--only", multiple=True, metavar="ID", help="Fetch only these dataset ids (repeatable).")
@click.option("--http-policies", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              envvar="MMBU_HTTP_POLICIES",
              help='YAML {host: {requests_per_second: .., max_attempts: ..}}; host "*" sets the default. '
                   '[env MMBU_HTTP_POLICIES]')
@click.option("--dry-run", is_flag=True,
              help="Print the plan only (datasets, hosts, bytes to download, free disk needed, what is already "
                   "fetched) and the rows each composition profile yields; exit 1 when a dataset cannot be fetched "
                   "now.")
def fetch(manifests: Path, data_dir: Path, mirror: Path | None, lock_path: Path | None, report_path: Path | None,
          only: tuple[str, ...], http_policies: Path | None, dry_run: bool) -> None:
    """Fetch each dataset's files into DATA/raw/<id>/, verified and safely extracted.

    Sources: the mirror first, then Zenodo (MMBU_ZENODO_URL), figshare (MMBU_FIGSHARE_URL), Hugging Face (HF_ENDPOINT, HF_TOKEN),
    Kaggle (MMBU_KAGGLE_URL, KAGGLE_USERNAME/KAGGLE_KEY or ~/.kaggle/kaggle.json), plain URLs or local
    paths. A dataset that is already complete is skipped without any network request. The plan is
    printed first; a dataset whose host does not answer fails at once with one line.
    Exit 0 all fetched, 1 some datasets failed (see the report), 2 bad usage or unreadable input.
    """
    paths = _manifest_paths(manifests)
    if only:
        paths = [p for p in paths if p.stem in set(only)]
        unknown = sorted(set(only) - {p.stem for p in paths})
        if unknown:
            raise click.UsageError(f"--only: no manifest for {', '.join(unknown)} in {manifests}")
    lock_path = lock_path or (manifests.parent if manifests.is_dir() else manifests.parent.parent) / "manifests.lock"
    try:
        lock = LockFile(lock_path)
    except LockError as exc:
        raise InvalidInput(str(exc)) from None
    try:
        policies, default_policy = configured_policies(http_policies)
    except ValueError as exc:
        raise InvalidInput(str(exc)) from None
    session = PoliteSession(policies, default_policy=default_policy or DEFAULT_POLICY)
    mirror = mirror if mirror and str(mirror) else None
    report_path = report_path or data_dir / "reports" / "fetch-report.jsonl"
    repo_root = repository_root(manifests)
    try:
        check_data_folders(data_dir)
    except DataFolderLayout as exc:
        raise InvalidInput(str(exc)) from None

    plan = plan_fetch(paths, data_dir, mirror=mirror, lock=lock, repo_root=repo_root,
                      session=probing_session(policies, default_policy))
    if dry_run:
        click.echo("\n".join(plan_lines(plan, str(manifests)) + composition_lines(paths)))
        raise SystemExit(ExitCode.ITEMS_FAILED if plan.blocked else ExitCode.OK)
    click.echo("\n".join(plan_lines(plan, str(manifests), with_errors=False)))
    console = output_console()
    display = RichFetchProgress if is_live(console) else PlainFetchProgress
    finished: list[FetchResult] = []
    on_interrupt(lambda: f"{sum(r.ok for r in finished)} of {len(paths)} dataset(s) fetched and verified; a partial "
                         f"download stays in {data_dir / 'downloads'} and resumes")
    try:
        with data_folder_lock(data_dir, "mmbu fetch"), display(len(paths), console=console) as progress:
            def on_result(result: FetchResult) -> None:
                finished.append(result)
                if result.ok or not UNREACHABLE.match(result.error or ""):  # unreachable hosts: one line each, below
                    progress.print(_describe(result))
                progress.dataset_done()

            results = fetch_all(paths, data_dir, mirror=mirror, lock=lock, session=session, repo_root=repo_root,
                                progress=progress, on_result=on_result,
                                blocked={d.dataset_id: d.error or "" for d in plan.blocked})
    except (DataFolderBusy, DataFolderLayout) as exc:
        raise InvalidInput(str(exc)) from None
    write_report(results, report_path)
    for line in failure_lines([r for r in results if UNREACHABLE.match(r.error or "")], str(report_path)):
        console.print(line, markup=False, highlight=False, soft_wrap=True)
    failed = [r for r in results if r.status == "error"]
    console.print(f"{len(results) - len(failed)} of {len(results)} datasets ready in {data_dir / 'raw'}; "
                  f"report: {report_path}", markup=False, highlight=False, soft_wrap=True)
    session.close()
    raise SystemExit(ExitCode.ITEMS_FAILED if failed else ExitCode.OK)
