"""`mmbu discover`: search the sources for candidates that fill the taxonomy's gaps."""
from __future__ import annotations

import json
import os
from pathlib import Path

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from mmbu.core.cli import ExitCode, InvalidInput
from mmbu.core.files import write_text_atomic
from mmbu.curation.agent.contamination import ExclusionList, ExclusionListError
from mmbu.curation.agent.gaps import count_accepted, find_gaps
from mmbu.curation.agent.llm import LlmHelper
from mmbu.curation.agent.queries import build_queries
from mmbu.curation.agent.run import Discoverer
from mmbu.curation.agent.settings import SettingsError, load_settings
from mmbu.curation.http import DEFAULT_POLICIES, HostPolicy, PoliteSession
from mmbu.curation.sources.candidate import SOURCES
from mmbu.curation.sources.huggingface import HuggingFaceSource
from mmbu.curation.sources.kaggle import KaggleSource
from mmbu.curation.sources.paperswithcode import PwcIndex, PwcIndexError
from mmbu.curation.sources.zenodo import ZenodoSource
from mmbu.taxonomy.model import TaxonomyError, load_taxonomy


def _sources(value: str) -> list[str]:
    names = [name.strip() for name in value.split(",") if name.strip()]
    unknown = [name for name in names if name not in SOURCES]
    if unknown or not names:
        raise click.BadParameter(f"unknown source(s) {', '.join(unknown) or '(none)'}; choose from {', '.join(SOURCES)}")
    return names


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--sources", "source_list", default=",".join(SOURCES), show_default=True,
              help="Comma-separated sources to search.")
@click.option("--out", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="Candidates JSONL to write (atomically), one candidate per line, excluded ones included.")
@click.option("--taxonomy", "taxonomy_path", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Taxonomy YAML (the bundled one by default).")
@click.option("--max-queries", default=200, show_default=True, type=click.IntRange(1),
              help="Query budget (widened queries count too).")
@click.option("--target", default=10, show_default=True, type=click.IntRange(1),
              help="A taxonomy leaf with fewer accepted datasets than this is a gap.")
@click.option("--accepted-dir", default=Path("manifests/datasets"), show_default=True,
              type=click.Path(file_okay=False, path_type=Path), help="Accepted dataset manifests (for the gaps).")
@click.option("--cache", "cache_dir", type=click.Path(file_okay=False, path_type=Path),
              help="Raw-response cache (default $MMBU_DATA/cache/discover); a rerun replays it.")
@click.option("--pwc-index", type=click.Path(dir_okay=False, path_type=Path),
              help="Papers with Code index (default $MMBU_PWC_INDEX).")
@click.option("--rate", type=click.FloatRange(min=0, min_open=True),
              help="Requests per second for hosts without a built-in policy (e.g. a local mirror).")
@click.option("--llm-base-url", help="OpenAI-compatible endpoint for extra synonyms and relevance (optional).")
@click.option("--llm-model", default="gpt-4o-mini", show_default=True, help="Model name for --llm-base-url.")
@click.option("--api-key-env", default="OPENAI_API_KEY", show_default=True,
              help="Environment variable holding the LLM API key.")
@click.option("--settings", "settings_path", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Discovery settings YAML (default: the bundled curation/data/discovery.yaml).")
def discover(source_list: str, out: Path, taxonomy_path: Path | None, max_queries: int, target: int,
             accepted_dir: Path, cache_dir: Path | None, pwc_index: Path | None, rate: float | None,
             llm_base_url: str | None, llm_model: str, api_key_env: str, settings_path: Path | None) -> None:
    """Search Zenodo, Hugging Face, Kaggle and the Papers with Code index for datasets that fill the taxonomy's gaps.

    Gaps are taxonomy leaves with fewer than --target accepted manifests. Queries are built from the
    taxonomy's synonyms × task words × specimens, compiled to each source's dialect, widened when thin.
    Zenodo is searched once per resource-type pass of discovery.yaml (datasets, then records uploaded as
    images). Candidates are deduplicated, screened (licence, label provenance, image evidence, image records
    with too few image files, contamination list) and scored. Base URLs: MMBU_ZENODO_URL, HF_ENDPOINT,
    MMBU_KAGGLE_URL; index: MMBU_PWC_INDEX.
    Exit 0 when every request succeeded, 1 when some failed (listed on stderr), 2 on bad input.
    """
    names = _sources(source_list)
    try:
        taxonomy = load_taxonomy(taxonomy_path)
        exclusions = ExclusionList.load()
        pwc = PwcIndex(pwc_index) if "paperswithcode" in names else None
        settings = load_settings(settings_path) if settings_path else load_settings()
    except PwcIndexError as exc:
        raise InvalidInput(f"{exc} (or leave paperswithcode out of --sources)") from None
    except (TaxonomyError, ExclusionListError, SettingsError) as exc:
        raise InvalidInput(str(exc)) from None
    cache_dir = cache_dir or Path(os.environ.get("MMBU_DATA", "data")) / "cache" / "discover"
    default_policy = HostPolicy(requests_per_second=rate) if rate else HostPolicy()
    session = PoliteSession(DEFAULT_POLICIES, cache_dir=cache_dir / "http", default_policy=default_policy)

    counts, problems = count_accepted(accepted_dir, taxonomy)
    gaps = find_gaps(taxonomy, counts, target)
    llm = None
    if llm_base_url:
        llm = LlmHelper(session, llm_base_url, llm_model, os.environ.get(api_key_env),
                        cache_dir / "llm.json", taxonomy.content_hash)
    extra = {gap.leaf.id: llm.synonyms(gap.leaf.name, gap.modality.name) for gap in gaps} if llm else {}
    queries = build_queries(taxonomy, gaps, settings.task_words, settings.specimens, extra)
    hosts = {"zenodo": ZenodoSource(session), "huggingface": HuggingFaceSource(session), "kaggle": KaggleSource(session)}

    with Progress(TextColumn("[bold]discover"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TextColumn("{task.description}"), console=Console(stderr=True), transient=True) as progress:
        # each query can be widened twice, and widened queries count against the budget too
        task = progress.add_task("", total=min(max_queries, max(3 * len(queries), 1)))

        def advance(query) -> None:
            progress.update(task, advance=1, description=query.text[:60])

        discoverer = Discoverer(taxonomy, settings, exclusions, hosts, names, pwc, llm, on_query=advance)
        report = discoverer.run(queries, max_queries, gaps)

    lines = [json.dumps(candidate.model_dump(mode="json"), ensure_ascii=False, sort_keys=True)
             for candidate in report.candidates]
    write_text_atomic(out, "".join(line + "\n" for line in lines))
    problems += report.problems
    for problem in problems:
        click.echo(f"warning: {problem}", err=True)
    summary = report.summary()
    click.echo(f"{len(gaps)} gap(s); {summary['queries']} queries; {summary['candidates']} candidates "
               f"({summary['excluded']} excluded) from {json.dumps(summary['by_source'], sort_keys=True)}; "
               f"{summary['leads']} Papers with Code lead(s); written to {out}")
    if summary["by_resource_type"]:  # the Zenodo passes: how many records of each resource type, how many excluded
        click.echo("by resource type: " + ", ".join(f"{kind} {counts['found']} ({counts['excluded']} excluded)"
                                                    for kind, counts in summary["by_resource_type"].items()))
    if report.problems:
        raise SystemExit(ExitCode.ITEMS_FAILED)
