"""A contributor's first fetch of one dataset (`mmbu manifests try ID`): fetched, read by its layout, built into
questions, with a diagnosis of the layout's patterns when it finds nothing.

Public names: `try_dataset(manifest_path, manifest, data_dir, ...) -> TrialReport`, `report_lines`, `draw_rows`.
They are imported on first use, so the `mmbu manifests` group (this package's cli) starts without the build's
pandas/pyarrow stack that only `try` needs.
"""
from __future__ import annotations

import importlib
from typing import Any

_HOMES = {"draw_rows": "render", "report_lines": "render", "sampled_rows": "render",
          "TrialReport": "run", "try_dataset": "run"}
__all__ = sorted(_HOMES)


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)
