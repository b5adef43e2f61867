"""A release folder is never replaced by an empty or smaller one unless the user asks (`--allow-partial`).

Offline, or with a host down, a build makes fewer rows than the release already on disk; replacing it would throw
away a good release for a partial one. The build then keeps the old release and says why; `mmbu build
--allow-partial` (`make dataset ALLOW_PARTIAL=1`) writes the partial one anyway.
"""
from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path


def existing_rows(release_dir: Path) -> dict[str, int] | None:
    """Rows per task of the release on disk (its build_info.json), or None when there is none to protect."""
    try:
        info = json.loads((Path(release_dir) / "build_info.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    rows = info.get("rows") if isinstance(info, dict) else None
    return {str(k): int(v) for k, v in rows.items()} if isinstance(rows, dict) else None


def why_keep(release_dir: Path, new_rows: Mapping[str, int]) -> str | None:
    """Why the release on disk must not be replaced by one of `new_rows` (rows per task), or None when it may be."""
    total = sum(new_rows.values())
    old = existing_rows(release_dir)
    if old is None:
        return None  # nothing to protect: even a release without rows is written, for its exclusions.csv
    if total == 0 and sum(old.values()):
        return f"no dataset built any row (the release on disk has {sum(old.values()):,})"
    if total < sum(old.values()):
        shrunk = ", ".join(f"{task} {old[task]:,} → {new_rows.get(task, 0):,}" for task in old
                           if new_rows.get(task, 0) < old[task])
        return f"the new build has {total:,} rows against the {sum(old.values()):,} of the release on disk ({shrunk})"
    return None
