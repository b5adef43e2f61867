"""Fetch: get each manifest's files into `$MMBU_DATA/raw/<id>/`, verified, extracted safely, or not at all.

Public names:
    fetch_dataset(manifest, data_dir, *, mirror=None, lock=None, session=None, repo_root=None,
                  progress=None, limits=None) -> FetchResult
    fetch_all(manifest_paths, data_dir, *, mirror=None, lock=None, session=None, repo_root=None,
              progress=None, on_result=None) -> list[FetchResult]
    fetch_manifest_file(path, data_dir, *, manifest=None, **options) -> FetchResult   (one file; never raises)
    is_complete(raw_dir, manifest, pins) -> CompletionRecord | None
    LockFile(path)            manifests/manifests.lock (sha256 pins)
    FetchResult, FetchedFile, CompletionRecord, FetchError, ExtractLimits, extract_archive
"""
from mmbu.build.fetch.archives import ExtractLimits, extract_archive
from mmbu.build.fetch.fetcher import (
    fetch_all,
    fetch_dataset,
    fetch_manifest_file,
    is_complete,
    repository_root,
    write_report,
)
from mmbu.build.fetch.lockfile import LockError, LockFile
from mmbu.build.fetch.model import COMPLETION_RECORD, CompletionRecord, FetchedFile, FetchError, FetchResult

__all__ = [
    "COMPLETION_RECORD", "CompletionRecord", "ExtractLimits", "FetchError", "FetchResult", "FetchedFile",
    "LockError", "LockFile", "extract_archive", "fetch_all", "fetch_dataset", "fetch_manifest_file", "is_complete", "repository_root",
    "write_report",
]
