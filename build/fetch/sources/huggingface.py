"""Hugging Face dataset repos at a pinned commit: huggingface_hub names the files, our bounded downloader moves them.

The Hub's tree listing at the commit gives each file and its size; huggingface_hub builds each file's `resolve` URL
(`hf_hub_url`) and headers (`build_hf_headers`: HF_TOKEN, else its saved login); the bytes go through
`FetchContext.download` like every other host's, so the size margin, minimum rate and per-file deadline of
`--http-policies` hold (huggingface_hub's own downloader has none of them: a broken or hostile HF_ENDPOINT could
send an endless body), a cut download resumes from its `.part` file with `Range`, and the LFS/Xet storage redirect
is followed (requests drops the token when it leaves the Hub's host). The declared size is the listing's, else the
lock's. A manifest without `revision` is fetched at the commit manifests.lock pins, or on the first fetch at the
default branch's current commit (then pinned). HF_ENDPOINT is read at call time (huggingface_hub reads it once, when
imported), so the variable works however the process started.
"""
from __future__ import annotations

import os

from mmbu.build.fetch.download import DownloadRequest
from mmbu.build.fetch.model import FetchedFile, FetchError
from mmbu.build.fetch.sources.context import FetchContext, RemoteContext, RemoteFile
from mmbu.curation.http import USER_AGENT, HttpError, PoliteSession
from mmbu.curation.manifest.source import HuggingFaceSource
from mmbu.curation.sources.huggingface import next_link

DEFAULT_ENDPOINT = "https://huggingface.co"


def fetch_huggingface(source: HuggingFaceSource, context: FetchContext) -> list[FetchedFile]:
    from huggingface_hub import hf_hub_url

    endpoint = huggingface_base_url()
    shown = f"{source.repo}@{source.revision[:12]}" if source.revision else source.repo
    try:
        # No revision in the manifest: the lock's pin, or (first fetch) the default branch's current commit.
        revision = context.pinned_or_resolved("revision", source.revision,
                                              lambda: _default_branch_commit(context.session, endpoint, source.repo))
        shown = f"{source.repo}@{revision[:12]}"
        sizes = _listed_sizes(context.session, endpoint, source, revision)
    except HttpError as exc:
        raise FetchError(f"Hugging Face dataset {shown}: {exc}") from None
    headers = _hub_headers()
    fetched = []
    for name, size in sizes.items():
        url = hf_hub_url(source.repo, name, repo_type="dataset", revision=revision, endpoint=endpoint)
        file = context.download(DownloadRequest(url=url, name=name, size=size, headers=dict(headers)))
        fetched.append(file.model_copy(update={"origin": f"hf://datasets/{source.repo}@{revision}/{name}"}))
    return fetched


def huggingface_remote_files(source: HuggingFaceSource, context: RemoteContext) -> list[RemoteFile]:
    """The files at the pinned commit with the Hub's sizes (see `_listed_sizes`). Without a revision in the manifest
    or the lock, the default branch as it is now (what the first fetch will pin)."""
    revision = source.revision or context.pinned.get("revision") or "main"
    sizes = _listed_sizes(context.session, huggingface_base_url(), source, revision)
    return [RemoteFile(name=name, size=size, basis="huggingface") for name, size in sizes.items()]


def huggingface_base_url() -> str:
    return (os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")


def _hub_headers() -> dict[str, str]:
    """huggingface_hub's headers for the Hub: its user agent (ours appended) and the token, when there is one."""
    from huggingface_hub.utils import build_hf_headers

    return build_hf_headers(user_agent=USER_AGENT)


def _default_branch_commit(session: PoliteSession, endpoint: str, repo: str) -> str:
    """The commit the default branch points at now (`GET /api/datasets/<repo>`, what HfApi.dataset_info asks),
    through our session so the answer is capped like every other API call."""
    info = session.request_json("GET", f"{endpoint}/api/datasets/{repo}", headers=_hub_headers(), use_cache=False).data
    sha = info.get("sha") if isinstance(info, dict) else None
    if not isinstance(sha, str) or not sha:
        raise FetchError(f"Hugging Face dataset {repo}: the Hub's answer names no commit for the default branch")
    return sha


def _listed_sizes(session: PoliteSession, endpoint: str, source: HuggingFaceSource,
                  revision: str) -> dict[str, int | None]:
    """The files at `revision` matching `patterns` (filtered as snapshot_download filters them) with the sizes the
    Hub's tree listing states (`/api/datasets/<repo>/tree/<rev>`, paged by `Link` headers), in path order.

    Asked through our own session rather than `HfApi.list_repo_tree`, which retries a dead host for about
    20 seconds (the plan must tell an offline user in seconds) and reads an answer of any size.
    """
    from huggingface_hub.utils import filter_repo_objects

    url: str | None = f"{endpoint}/api/datasets/{source.repo}/tree/{revision}"
    params: dict[str, str] | None = {"recursive": "true"}
    sizes: dict[str, int | None] = {}
    headers = _hub_headers()
    while url:
        answer = session.request_json("GET", url, params=params, headers=headers, use_cache=False)
        for entry in answer.data if isinstance(answer.data, list) else []:
            if isinstance(entry, dict) and entry.get("type") == "file" and isinstance(entry.get("path"), str):
                size = entry.get("size")
                sizes[entry["path"]] = size if isinstance(size, int) and size >= 0 else None
        url, params = next_link(answer.headers.get("Link")), None  # the next URL carries the query itself
    names = list(filter_repo_objects(sorted(sizes), allow_patterns=source.patterns))
    if not names:
        raise FetchError(f"Hugging Face dataset {source.repo}@{revision[:12]} has no files matching "
                         f"{source.patterns or '*'}")
    return {name: sizes[name] for name in names}
