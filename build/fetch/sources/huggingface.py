"""Hugging Face dataset repos at a pinned commit, through huggingface_hub's own snapshot_download.

huggingface_hub reads HF_ENDPOINT when it is imported; we read it at call time and pass it explicitly,
so the variable works however the process started. Downloads land in `$MMBU_DATA/downloads/<id>/huggingface`
(huggingface_hub's cache layout: it resumes interrupted files itself) and are copied into staging; the folder
goes once the dataset is complete. A manifest without `revision` is fetched at the commit manifests.lock pins,
or on the first fetch at the default branch's current commit (then pinned). HF_TOKEN is picked up by huggingface_hub from the environment. The host is
reserved in the PoliteSession for the duration (one worker, rate cap, breaker); retries and 429 handling inside
are huggingface_hub's own (`http_backoff`).
"""
from __future__ import annotations

import os
from pathlib import Path

from mmbu.build.fetch.model import FetchedFile, FetchError
from mmbu.build.fetch.sources.context import FetchContext, RemoteContext, RemoteFile, tree_files
from mmbu.curation.http import USER_AGENT
from mmbu.curation.manifest.source import HuggingFaceSource
from mmbu.curation.sources.huggingface import next_link


def fetch_huggingface(source: HuggingFaceSource, context: FetchContext) -> list[FetchedFile]:
    from huggingface_hub import HfApi, snapshot_download
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError

    endpoint = os.environ.get("HF_ENDPOINT") or None
    shown = f"{source.repo}@{source.revision[:12]}" if source.revision else source.repo
    try:
        with context.session.reserve_host(endpoint or "https://huggingface.co"):
            # No revision in the manifest: the lock's pin, or (first fetch) the default branch's current commit.
            revision = context.pinned_or_resolved("revision", source.revision, lambda: HfApi(
                endpoint=endpoint, user_agent=USER_AGENT).dataset_info(source.repo).sha)
            shown = f"{source.repo}@{revision[:12]}"
            folder = snapshot_download(
                repo_id=source.repo,
                repo_type="dataset",
                revision=revision,
                allow_patterns=source.patterns,
                cache_dir=context.downloads / "huggingface",  # removed with downloads/<id>/ once complete
                endpoint=endpoint,
                user_agent=USER_AGENT,
                max_workers=1,  # one request at a time per host, like every other download of ours
            )
    except (HfHubHTTPError, LocalEntryNotFoundError, OSError) as exc:
        lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
        # e.g. "404 Client Error. Repository Not Found for url: ..."
        summary = " ".join(lines[:2]) or type(exc).__name__
        raise FetchError(f"Hugging Face dataset {shown}: {summary}") from None
    root = Path(folder)
    names = tree_files(root, follow_links=True)
    if not names:
        raise FetchError(f"Hugging Face dataset {shown} has no files matching {source.patterns or '*'}")
    return [context.copy_in(root, name, origin=f"hf://datasets/{source.repo}@{revision}/{name}",
                            links_within=context.downloads / "huggingface") for name in names]


def huggingface_remote_files(source: HuggingFaceSource, context: RemoteContext) -> list[RemoteFile]:
    """The files at the pinned commit with the Hub's sizes, from its tree listing (`/api/datasets/<repo>/tree/<rev>`,
    paged by `Link` headers), filtered by `patterns` exactly as snapshot_download filters them. Without a revision
    in the manifest or the lock, the default branch as it is now (what the first fetch will pin).

    Asked through our own session rather than `HfApi.list_repo_tree`, which retries a dead host for about
    20 seconds: the plan must tell an offline user in seconds.
    """
    from huggingface_hub.utils import filter_repo_objects

    endpoint = (os.environ.get("HF_ENDPOINT") or "https://huggingface.co").rstrip("/")
    token = os.environ.get("HF_TOKEN")
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    revision = source.revision or context.pinned.get("revision") or "main"
    url: str | None = f"{endpoint}/api/datasets/{source.repo}/tree/{revision}"
    params: dict[str, str] | None = {"recursive": "true"}
    sizes: dict[str, int | None] = {}
    while url:
        answer = context.session.request_json("GET", url, params=params, headers=headers, use_cache=False)
        for entry in answer.data if isinstance(answer.data, list) else []:
            if entry.get("type") == "file":
                sizes[entry["path"]] = entry.get("size")
        url, params = next_link(answer.headers.get("Link")), None  # the next URL carries the query itself
    names = list(filter_repo_objects(sorted(sizes), allow_patterns=source.patterns))
    if not names:
        raise FetchError(f"Hugging Face dataset {source.repo}@{revision[:12]} has no files matching "
                         f"{source.patterns or '*'}")
    return [RemoteFile(name=name, size=sizes[name], basis="huggingface") for name in names]
