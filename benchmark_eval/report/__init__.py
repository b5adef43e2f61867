"""Reports of scored runs: Markdown with the paper's table shape, CSV/JSON, PNG plots."""
from .api import write_report

__all__ = ["write_report"]
