"""The run manifest (``run.json``) and the completeness report, written atomically.

``run.json`` says what produced the records: package versions, the release (path and its
``build_info.json``), the model (registry entry, served name, revision), backend settings, prompt
version, generation parameters and seeds, and the command line with secrets removed. Earlier
invocations into the same run directory are kept under ``invocations``.
"""
from __future__ import annotations

import json
import platform
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any

from mmbu.core.files import write_json_atomic as _write_json
from mmbu.core.secrets import redact_argv
from mmbu.core.version import toolkit_version

_PACKAGES = ("mmbu", "aiohttp", "pyarrow", "pandas", "pillow", "pydantic", "tenacity", "vllm", "transformers", "torch")



def write_json_atomic(path: Path, payload: Any) -> None:
    """JSON in the order it was built (not sorted: `run.json` reads top-down), written atomically."""
    _write_json(path, payload, sort_keys=False)


def package_versions() -> dict[str, str]:
    versions = {}
    for name in _PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return versions


def build_manifest(*, release_dir: Path, entry: dict[str, Any], served_model: str, backend: dict[str, Any],
                   prompt_version: str, generation: dict[str, Any], selection: dict[str, Any],
                   argv: list[str], started_at: float, finished_at: float | None,
                   previous: dict[str, Any] | None, endpoints: list[dict[str, Any]] | None = None,
                   reported_models: list[str] | None = None, stopped: str | None = None,
                   release_source: str | None = None) -> dict[str, Any]:
    build_info_path = release_dir / "build_info.json"
    try:
        build_info = json.loads(build_info_path.read_text(encoding="utf-8")) if build_info_path.is_file() else None
    except (OSError, json.JSONDecodeError):
        build_info = {"error": f"{build_info_path} is not valid JSON"}
    invocation = {
        "command_line": redact_argv(argv),
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started_at)),
        "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(finished_at)) if finished_at else None,
        "selection": selection,
        "toolkit_version": toolkit_version(),
        # what the servers said they run: /models and the tiny request before the run, the answers' `model` field
        "endpoints": endpoints or [],
        "reported_models": reported_models or [],
    }
    if stopped:
        invocation["stopped"] = stopped
    invocations = list((previous or {}).get("invocations", []))
    invocations.append(invocation)
    info = build_info if isinstance(build_info, dict) else {}
    return {
        "tool": "mmbu eval run",
        "toolkit_version": toolkit_version(),
        "release": str(release_dir.resolve()),
        "release_source": release_source or str(release_dir),  # a folder, or hf://OWNER/NAME@COMMIT
        "release_version": info.get("release_version"),
        "release_inputs_hash": info.get("inputs_hash"),
        "release_build_info": build_info,
        "model": entry["name"],
        "model_id": entry.get("hf_id") or entry.get("api_model"),
        "model_revision": entry.get("revision"),
        "served_model": served_model,
        "served_model_reported": _reported(endpoints, reported_models, previous),
        "registry_entry": entry,
        "backend": backend,
        "prompt_version": prompt_version,
        "generation": generation,
        "seeds": {"generation_seed": generation.get("seed")},
        "versions": {"python": platform.python_version(), **package_versions()},
        "platform": platform.platform(),
        "python_executable": sys.executable,
        "invocations": invocations,
    }


def _reported(endpoints: list[dict[str, Any]] | None, reported_models: list[str] | None,
              previous: dict[str, Any] | None) -> list[str]:
    """The model names the servers reported over every invocation into this run directory (sorted, unique)."""
    names = {e["reported_model"] for e in endpoints or [] if e.get("reported_model")} | set(reported_models or ())
    names |= set((previous or {}).get("served_model_reported") or [])
    return sorted(names)


def read_previous(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None
    except (OSError, json.JSONDecodeError):
        return None
