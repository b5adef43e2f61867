"""The release on disk (docs/architecture.md §3.4): Parquet shards per task config with embedded PNGs, dataset card,
croissant.json, SHA256SUMS, build_info.json, exclusions.csv and statistics.

Public face:
    write_release(rows_by_task, out_dir, manifests, build_info, *, exclusions=(), version, max_shard_bytes,
                  max_row_group_bytes) -> ReleaseSummary
    collect_build_info(seed=, taxonomy_hash=, manifest_paths=, question_version=, extra=) -> dict
    group_by_task(frames) -> {task: DataFrame}          question rows per config, for write_release
    verify_sha256sums(release_dir) -> [problems]
    release_features(), RELEASE_COLUMNS, CONTRACT_COLUMNS, CONFIGS   (the contract, from mmbu.core.release)
"""
from mmbu.build.release.build_info import collect_build_info, package_versions
from mmbu.build.release.checksums import verify_sha256sums, write_sha256sums
from mmbu.build.release.rows import ReleaseInputError, RowsFiles, group_by_task
from mmbu.build.release.writer import ReleaseSummary, write_release
from mmbu.core.release import CONTRACT_COLUMNS, RELEASE_COLUMNS, SPLIT, release_features
from mmbu.core.release import TASKS as CONFIGS

__all__ = [
    "CONFIGS", "CONTRACT_COLUMNS", "RELEASE_COLUMNS", "SPLIT", "ReleaseInputError", "ReleaseSummary", "RowsFiles",
    "collect_build_info", "group_by_task", "package_versions", "release_features",
    "verify_sha256sums", "write_release", "write_sha256sums",
]
