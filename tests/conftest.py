"""Shared fixtures. Nothing here touches the internet; servers listen on 127.0.0.1 only."""
from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # makes `support` importable under importlib mode

from support.loopback import LoopbackServer  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[1]

# Keep Hugging Face caches out of the user's home (datasets caches local configs by folder name); one per test
# process (each xdist worker has its own), removed when the process ends.
os.environ["HF_DATASETS_CACHE"] = tempfile.mkdtemp(prefix="mmbu-test-hf-datasets-")
atexit.register(shutil.rmtree, os.environ["HF_DATASETS_CACHE"], ignore_errors=True)

# Loopback hosts need no 1 request/s politeness: every session the toolkit builds by itself (`mmbu build`, `mmbu fetch`,
# `fetch_dataset` without a session), in this process and in the `mmbu` processes tests start, reads this file.
os.environ["MMBU_HTTP_POLICIES"] = str(Path(__file__).parent / "support" / "fast_http_policies.yaml")

# Never let a test reach a real service or a user's credentials.
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ["NO_PROXY"] = "127.0.0.1,localhost"
for secret in ("HF_TOKEN", "KAGGLE_USERNAME", "KAGGLE_KEY", "OPENAI_API_KEY"):
    os.environ.pop(secret, None)


@pytest.fixture
def loopback():
    """A started loopback HTTP server; add routes with `loopback.add(method, path, reply)`."""
    with LoopbackServer() as server:
        yield server


@pytest.fixture
def repo_root() -> Path:
    return REPO_ROOT
