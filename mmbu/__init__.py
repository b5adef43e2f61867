"""MMBU toolkit: rebuild the MMBU biomedical VLM benchmark and evaluate models on it.

The stages live in their own top-level folders and are mounted here as sub-packages:
`mmbu.taxonomy`, `mmbu.curation`, `mmbu.build`, `mmbu.benchmark_eval`.
"""
from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("mmbu")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0+unknown"
