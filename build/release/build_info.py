"""build_info.json: what produced a release (versions, manifest and taxonomy hashes, seeds, composition profile)."""
from __future__ import annotations

import hashlib
import os
import platform
import sys
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

from mmbu.build.questions.prototypes import load_prototypes

# distributions whose versions change pixels, tables or questions
TRACKED_PACKAGES = ("mmbu", "numpy", "pillow", "pydicom", "pylibjpeg", "pylibjpeg-openjpeg", "python-gdcm",
                    "nibabel", "openslide-python", "openslide-bin", "tifffile", "imagecodecs", "scipy", "pandas",
                    "pandera", "pyarrow", "datasets", "pydantic", "pyyaml", "matplotlib")


def package_versions(names: Iterable[str] = TRACKED_PACKAGES) -> dict[str, str | None]:
    versions = {}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def manifest_hashes(paths: Iterable[str | Path]) -> dict[str, str]:
    """sha256 of each manifest file, keyed by its stem (the dataset id)."""
    return {Path(p).stem: hashlib.sha256(Path(p).read_bytes()).hexdigest() for p in sorted(map(str, paths))}


def created_at() -> str:
    """When the release was made: `SOURCE_DATE_EPOCH` (reproducible-builds.org) when set, so that two builds of the
    same inputs in the same folder are byte-identical down to build_info.json; else now."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    if epoch is None:
        return datetime.now(timezone.utc).isoformat(timespec="seconds")
    if not epoch.strip().isdigit():
        raise ValueError(f"SOURCE_DATE_EPOCH={epoch!r} is not a whole number of seconds since 1970-01-01 UTC")
    return datetime.fromtimestamp(int(epoch), timezone.utc).isoformat(timespec="seconds")


def collect_build_info(*, seed: int, taxonomy_hash: str, manifest_paths: Iterable[str | Path] = (),
                       question_version: str | None = None, composition: Mapping[str, object] | None = None,
                       extra: Mapping[str, object] | None = None) -> dict[str, object]:
    """The build_info dict `write_release` stores; the pipeline may add its command line, jobs, etc. in `extra`.

    `question_version` defaults to the bundled prototypes' version (what `instantiate_questions` used).
    `composition` is the profile the rows were taken under (`LoadedComposition.stamp`: profile, version, seed, file,
    sha256); its seed joins `seeds`, and the release card states it.
    """
    seeds: dict[str, object] = {"questions": seed}
    if composition is not None:
        seeds["composition"] = composition["seed"]
    return {
        "created": created_at(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "packages": package_versions(),
        "seeds": seeds,
        "taxonomy_sha256": taxonomy_hash,
        "manifests_sha256": manifest_hashes(manifest_paths),
        "question_version": question_version or load_prototypes().version,
        **({"composition": dict(composition)} if composition is not None else {}),
        **(extra or {}),
    }
