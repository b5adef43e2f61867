"""Reports of scored runs: Markdown with the paper's table shape, CSV/JSON, PNG plots."""
from mmbu.benchmark_eval.report.api import write_report

__all__ = ["write_report"]
