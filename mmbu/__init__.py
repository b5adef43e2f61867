"""MMBU toolkit: rebuild the MMBU biomedical VLM benchmark and evaluate models on it.

The stages live in their own top-level folders and are mounted here as sub-packages:
`mmbu.taxonomy`, `mmbu.curation`, `mmbu.build`, `mmbu.benchmark_eval`, all standing on `mmbu.core`.
"""
from __future__ import annotations


def __getattr__(name: str) -> str:
    # Looked up on first use: importlib.metadata costs ~35 ms, paid by every command otherwise.
    if name == "__version__":
        from mmbu.core.version import toolkit_version

        return toolkit_version()
    raise AttributeError(f"module 'mmbu' has no attribute {name!r}")
