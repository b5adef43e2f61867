"""`mmbu release push`: publish a built release to a Hugging Face dataset repository, with huggingface_hub.

The release folder is already laid out as the Hub expects a dataset: `README.md` with the YAML `configs:` the
dataset viewer and `load_dataset(repo, CONFIG)` read, `data/<config>/test-*.parquet` shards, `croissant.json`,
`SHA256SUMS`, `build_info.json`, `LICENSE`. It is checked against its SHA256SUMS first (a damaged release is never
published), then uploaded as one commit (`HfApi.upload_folder`: the Hub decides which files go through LFS/Xet),
to a branch `revision` (created when missing). The commit's sha goes into `pushes.json` beside `build_info.json`
(written atomically, one entry per push, never uploaded), so `mmbu eval run --release hf://REPO@SHA` can name
exactly these bytes.

Endpoint from HF_ENDPOINT (huggingface_hub's own); the token from the variable `token_env` names (default
HF_TOKEN), else huggingface_hub's saved login. The token is never written or printed.
"""
from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mmbu.core.checksums import PUSH_RECORD, verify_sha256sums
from mmbu.core.files import write_json_atomic
from mmbu.core.secrets import redact_secrets, redact_url
from mmbu.core.version import toolkit_version

DEFAULT_TOKEN_ENV = "HF_TOKEN"
DEFAULT_ENDPOINT = "https://huggingface.co"


class PushError(Exception):
    """The release cannot be published; the message names the cause (the Hub's own words when it answered).
    `usage` is True when the user must fix an argument, a file or a credential (exit 2)."""

    def __init__(self, message: str, *, usage: bool = False) -> None:
        super().__init__(message)
        self.usage = usage


@dataclass(frozen=True)
class PushConfig:
    """One `mmbu release push`."""

    release_dir: Path
    repo_id: str  # owner/name of the dataset repository
    revision: str = "main"  # the branch to commit to (created from main when missing)
    private: bool = False  # for a repository this creates; an existing one keeps its visibility
    token_env: str | None = None  # variable holding the token (None: HF_TOKEN if set, else the saved login)
    commit_message: str | None = None


def _token(config: PushConfig) -> str | None:
    if config.token_env is not None:
        value = os.environ.get(config.token_env)
        if not value:
            raise PushError(f"--token-env {config.token_env}: the variable is not set", usage=True)
        return value
    return os.environ.get(DEFAULT_TOKEN_ENV) or None


def _release_facts(release_dir: Path) -> dict[str, Any]:
    """build_info.json, after checking the folder is a whole release (SHA256SUMS holds)."""
    info_path = release_dir / "build_info.json"
    if not info_path.is_file():
        raise PushError(f"{release_dir}: no build_info.json (not a release written by `mmbu build`)", usage=True)
    problems = verify_sha256sums(release_dir)
    if problems:
        shown = "; ".join(problems[:5]) + (f"; and {len(problems) - 5} more" if len(problems) > 5 else "")
        raise PushError(f"{release_dir}: the release does not match its SHA256SUMS ({shown}); rebuild it before "
                        "publishing", usage=True)
    try:
        return json.loads(info_path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise PushError(f"{info_path}: not valid JSON ({exc})", usage=True) from None


def push_release(config: PushConfig) -> dict[str, Any]:
    """Upload the release as one commit and record it in `pushes.json`; returns the record."""
    from huggingface_hub import HfApi
    from huggingface_hub.errors import HfHubHTTPError

    release_dir = Path(config.release_dir)
    info = _release_facts(release_dir)
    token = _token(config)
    endpoint = (os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")
    api = HfApi(endpoint=endpoint, token=token)
    version = info.get("release_version")
    message = config.commit_message or (f"MMBU release {version} (inputs {str(info.get('inputs_hash'))[:12]}), "
                                        f"built with mmbu {info.get('toolkit_version') or toolkit_version()}")
    try:
        api.create_repo(config.repo_id, repo_type="dataset", private=config.private, exist_ok=True)
        if config.revision != "main":
            api.create_branch(config.repo_id, branch=config.revision, repo_type="dataset", exist_ok=True)
        commit = api.upload_folder(folder_path=release_dir, repo_id=config.repo_id, repo_type="dataset",
                                   revision=config.revision, commit_message=message,
                                   ignore_patterns=[PUSH_RECORD, ".*"])
    except HfHubHTTPError as exc:
        status = exc.response.status_code if exc.response is not None else None
        said = redact_secrets(" ".join(str(exc).split()), (token,))
        raise PushError(f"the Hub at {redact_url(endpoint)} refused the push to {config.repo_id}: {said}",
                        usage=status in (401, 403)) from None
    except (OSError, ValueError) as exc:  # no connection; a card the Hub's YAML check rejects
        said = redact_secrets(" ".join(str(exc).split()), (token,))
        raise PushError(f"could not push {release_dir} to {config.repo_id} at {redact_url(endpoint)}: {said}") from None
    record = {"repo": config.repo_id, "revision": config.revision, "commit": commit.oid, "url": commit.commit_url,
              "endpoint": redact_url(endpoint), "release_version": version, "inputs_hash": info.get("inputs_hash"),
              "pushed_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "toolkit_version": toolkit_version()}
    record_push(release_dir, record)
    return record


def record_push(release_dir: Path, record: dict[str, Any]) -> Path:
    """Append `record` to the release's `pushes.json`, atomically (a kill leaves the previous list whole)."""
    path = Path(release_dir) / PUSH_RECORD
    try:
        pushes = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else []
    except ValueError:
        pushes = []
    pushes = pushes if isinstance(pushes, list) else []
    return write_json_atomic(path, [*pushes, record])
