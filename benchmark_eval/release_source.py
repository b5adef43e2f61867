"""Where a release comes from: a folder, or a Hugging Face dataset repository at a revision.

`mmbu eval run --release` takes a folder, `hf://OWNER/NAME@REVISION` (a commit sha, a branch or a tag; without
`@REVISION`, main), or `OWNER/NAME` with `--revision REV`. A repository is downloaded with huggingface_hub's
`snapshot_download` into its cache (`--release-cache DIR`, default huggingface_hub's: HF_HUB_CACHE) and checked
against the release's own SHA256SUMS before a row is read; a snapshot that does not match is refused, one sentence
naming the file. The check is remembered per commit (`<cache repo folder>/mmbu-verified/<commit>`), so a second
run on the same commit starts at once. Endpoint from HF_ENDPOINT, token from HF_TOKEN (huggingface_hub's own).
Every answer the endpoint sends is bounded (`hub_download`): a file by the size the tree listing at the commit
states plus the toolkit's margin, a minimum rate and a per-file deadline; a breach is one sentence naming the file.
"""
from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from mmbu.benchmark_eval.release import ReleaseError
from mmbu.core.checksums import SUMS_NAME, verify_sha256sums
from mmbu.core.files import write_text_atomic
from mmbu.core.secrets import redact_secrets

if TYPE_CHECKING:
    from huggingface_hub import HfApi

    from mmbu.benchmark_eval.hub_download import HubBounds

HUB_PREFIX = "hf://"


@dataclass(frozen=True)
class ResolvedRelease:
    """A release folder on this machine, and what it is (a folder, or a repository at a commit)."""

    path: Path
    source: str  # the folder as given, or hf://OWNER/NAME@COMMIT
    commit: str | None = None


def hub_reference(value: str | Path, revision: str | None) -> tuple[str, str] | None:
    """(repo id, revision) when `value` names a Hub repository (hf://ID[@REV], or ID with `revision`), else None."""
    text = str(value)
    if text.startswith(HUB_PREFIX):
        repo, _, at = text[len(HUB_PREFIX):].partition("@")
        if revision is not None and at and revision != at:
            raise ReleaseError(f"--release {text} names revision {at} and --revision {revision}; give one")
        return _repo_id(repo, text), (at or revision or "main")
    if revision is not None:
        return _repo_id(text, text), revision
    return None


def _repo_id(repo: str, given: str) -> str:
    if repo.count("/") != 1 or not all(repo.split("/")):
        raise ReleaseError(f"--release {given}: a Hub repository is OWNER/NAME (hf://OWNER/NAME@REVISION)")
    return repo


def resolve_release(value: str | Path, revision: str | None = None, cache_dir: Path | None = None,
                    bounds: HubBounds | None = None) -> ResolvedRelease:
    """The release folder `value` names: itself, or a verified snapshot of a Hub repository (see the module),
    downloaded within `bounds` (default: `HubBounds.from_environment()`)."""
    reference = hub_reference(value, revision)
    if reference is None:
        return ResolvedRelease(Path(value), str(value))
    repo, wanted = reference
    snapshot = _download(repo, wanted, cache_dir, bounds)
    commit = snapshot.name  # huggingface_hub's snapshot folders are named by commit sha
    _verify(snapshot, repo, commit)
    return ResolvedRelease(snapshot, f"{HUB_PREFIX}{repo}@{commit}", commit)


def _download(repo: str, revision: str, cache_dir: Path | None, bounds: HubBounds | None) -> Path:
    from huggingface_hub import HfApi, snapshot_download
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError

    from mmbu.benchmark_eval.hub_download import HubBodyRefused, HubBounds, bounded_hub_client

    token = os.environ.get("HF_TOKEN") or None
    endpoint = os.environ.get("HF_ENDPOINT") or None
    try:
        bounds = bounds or HubBounds.from_environment()
    except ValueError as exc:
        raise ReleaseError(str(exc)) from None
    try:
        with bounded_hub_client(repo, bounds) as sizes:
            _list_sizes(HfApi(endpoint=endpoint, token=token), repo, revision, sizes)
            return Path(snapshot_download(repo, repo_type="dataset", revision=revision, token=token,
                                          cache_dir=str(cache_dir) if cache_dir else None, endpoint=endpoint))
    except HubBodyRefused as exc:
        raise ReleaseError(f"{_said(exc, token)}; the release was not used") from None
    except LocalEntryNotFoundError as exc:  # no connection and nothing cached for this revision
        raise ReleaseError(f"hf://{repo}@{revision}: cannot be downloaded and is not in the cache "
                           f"({_said(exc, token)})") from None
    except HfHubHTTPError as exc:
        raise ReleaseError(f"hf://{repo}@{revision}: the Hub refused it ({_said(exc, token)})") from None
    except (OSError, ValueError) as exc:
        raise ReleaseError(f"hf://{repo}@{revision}: could not be downloaded ({_said(exc, token)})") from None


def _list_sizes(api: HfApi, repo: str, revision: str, sizes: dict[tuple[str, str], int | None]) -> None:
    """Fill `sizes` with {(commit, path): size} from the tree listing at the commit `revision` names now, the
    bound of each file's body. Without a connection, nothing: snapshot_download then answers from its cache."""
    import httpx2
    from huggingface_hub import RepoFile
    from huggingface_hub.errors import OfflineModeIsEnabled

    try:
        commit = api.dataset_info(repo, revision=revision).sha
        entries = list(api.list_repo_tree(repo, revision=commit, recursive=True, repo_type="dataset"))
    except (httpx2.ConnectError, httpx2.TimeoutException, OfflineModeIsEnabled):
        return
    for entry in entries:
        if isinstance(entry, RepoFile) and commit:
            sizes[(commit, entry.path)] = entry.size if isinstance(entry.size, int) and entry.size >= 0 else None


def _said(exc: Exception, token: str | None) -> str:
    return redact_secrets(" ".join(str(exc).split()), (token,))[:400]


def _verify(snapshot: Path, repo: str, commit: str) -> None:
    sums = snapshot / SUMS_NAME
    if not sums.is_file():
        raise ReleaseError(f"hf://{repo}@{commit}: no {SUMS_NAME} in the repository (not a release written by "
                           "`mmbu build`), so its files cannot be checked")
    digest = hashlib.sha256(sums.read_bytes()).hexdigest()
    stamp = snapshot.parent.parent / "mmbu-verified" / commit
    if stamp.is_file() and stamp.read_text(encoding="utf-8").strip() == digest:
        return
    problems = verify_sha256sums(snapshot, ignore=(".gitattributes",))  # the Hub's own file, not the release's
    if problems:
        shown = "; ".join(problems[:5]) + (f"; and {len(problems) - 5} more" if len(problems) > 5 else "")
        raise ReleaseError(f"hf://{repo}@{commit}: the downloaded release does not match its {SUMS_NAME} ({shown}); "
                           "it was not used")
    stamp.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(stamp, digest + "\n")
