"""MMBU toolkit: rebuild the MMBU biomedical VLM benchmark and evaluate models on it.

The stages live in their own top-level folders and are mounted here as sub-packages:
`mmbu.taxonomy`, `mmbu.curation`, `mmbu.build`, `mmbu.benchmark_eval`.
"""
from __future__ import annotations


def __getattr__(name: str) -> str:
    # Looked up on first use: importlib.metadata costs ~35 ms, paid by every command otherwise.
    if name == "__version__":
        from importlib.metadata import PackageNotFoundError, version

        try:
            return version("mmbu")
        except PackageNotFoundError:  # running from a source tree that is not installed
            return "0+unknown"
    raise AttributeError(f"module 'mmbu' has no attribute {name!r}")
