"""`manifests/manifests.lock`: the sha256 of every fetched file, pinned on first fetch and enforced after.

Format (YAML, sorted, reviewed in pull requests like code):

    version: 1
    datasets:
      <dataset id>:
        source: {kind: zenodo, record: 11012345}    # the manifest source the pins belong to
        files:
          images.zip: {sha256: <64 hex>, size: 734003200}
        resolved: {revision: <40 hex>}              # what the first fetch resolved (see below)

A manifest leaves out what no source states (a Hugging Face `revision`, a Kaggle or figshare `version`): the first
fetch resolves it (the default branch's commit, the current version), records it under `resolved` and every later
fetch uses the recorded value, so the files cannot move under a pinned sha256.

When a manifest's `source` changes (a new Zenodo version, another HF revision), its old pins no longer
apply and the next fetch pins the new files; the lock diff shows the change to reviewers.
"""
from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from mmbu.core.files import write_text_atomic
from mmbu.core.yaml_io import dump_yaml, read_yaml

HEADER = ("# Pinned downloads of manifests/datasets/*.yaml and manifests/demo/*.yaml, written by `mmbu fetch`.\n"
          "# A fetched file whose sha256 differs from its pin is rejected. Review changes like code.\n")


class PinnedFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    size: int = Field(ge=0)


class PinnedDataset(BaseModel):
    model_config = ConfigDict(extra="forbid")

    source: dict[str, Any]
    files: dict[str, PinnedFile] = Field(default_factory=dict)
    resolved: dict[str, Any] = Field(
        default_factory=dict, description="Source fields the manifest leaves out, as the first fetch resolved them.")


class LockDocument(BaseModel):
    model_config = ConfigDict(extra="forbid")

    version: int = 1
    datasets: dict[str, PinnedDataset] = Field(default_factory=dict)


class LockError(ValueError):
    """The lock file cannot be read; the message names the file and the field."""


class LockFile:
    """The lock on disk, safe to update from several fetch threads (each update rewrites it atomically)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._mutex = threading.Lock()
        self.document = self._read()
        self._entry_texts: dict[str, str] = {}  # each dataset's block as the whole document's dump writes it

    def _read(self) -> LockDocument:
        if not self.path.exists():
            return LockDocument()
        try:
            data = read_yaml(self.path) or {}
            return LockDocument.model_validate(data)
        except yaml.YAMLError as exc:
            raise LockError(f"{self.path}: not valid YAML ({exc})") from None
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "(top level)"
            raise LockError(f"{self.path}: field {where}: {first['msg']}") from None
        except OSError as exc:
            raise LockError(f"{self.path}: cannot read the file ({exc.strerror or exc})") from None

    def pins_for(self, dataset_id: str, source: dict[str, Any]) -> dict[str, PinnedFile]:
        """The pins that apply to this dataset's current source (none if the source changed)."""
        entry = self.document.datasets.get(dataset_id)
        if entry is None or entry.source != source:
            return {}
        return dict(entry.files)

    def resolved_for(self, dataset_id: str, source: dict[str, Any]) -> dict[str, Any]:
        """The revision/version pinned for this dataset's current source (none if the source changed)."""
        entry = self.document.datasets.get(dataset_id)
        if entry is None or entry.source != source:
            return {}
        return dict(entry.resolved)

    def record(self, dataset_id: str, source: dict[str, Any], files: dict[str, PinnedFile],
               resolved: dict[str, Any] | None = None) -> None:
        """Replace the dataset's pins and write the lock file atomically (not at all when they are the same: the lock
        usually lives in the repository, where every rewrite is churn and a kill mid-write leaves a temporary)."""
        pinned = PinnedDataset(source=source, files=files, resolved=resolved or {})
        with self._mutex:
            if self.document.datasets.get(dataset_id) == pinned and self.path.exists():
                return
            self.document.datasets[dataset_id] = pinned
            self.document.datasets = dict(sorted(self.document.datasets.items()))
            self._entry_texts.pop(dataset_id, None)
            write_text_atomic(self.path, HEADER + self._body())

    def _body(self) -> str:
        """The YAML of the whole document (never empty: `record` adds an entry first), dumping only the entries
        not dumped before.

        The lock is rewritten after every fetched dataset: dumping all of it each time made a 410-dataset
        build spend a sixth of its CPU in the YAML emitter (quadratic in datasets). Each entry's block is
        dumped under its own `datasets:` key, so it is indented, wrapped and quoted as in a dump of the whole
        document (tested), and the blocks are joined in the sorted order the whole dump uses; `version`, the
        only other key, sorts after `datasets`.
        """
        for dataset_id, entry in self.document.datasets.items():
            if dataset_id not in self._entry_texts:
                text = dump_yaml({"datasets": {dataset_id: _short(entry.model_dump(mode="json"))}})
                self._entry_texts[dataset_id] = text.removeprefix("datasets:\n")
        blocks = "".join(self._entry_texts[dataset_id] for dataset_id in self.document.datasets)
        return "datasets:\n" + blocks + dump_yaml({"version": self.document.version})


def _short(entry: dict[str, Any]) -> dict[str, Any]:
    """Most sources are pinned in their manifest: their entries leave out the empty `resolved`."""
    if not entry["resolved"]:
        del entry["resolved"]
    return entry
