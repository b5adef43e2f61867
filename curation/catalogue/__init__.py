"""The catalogue's coverage against the taxonomy and the paper (`mmbu catalogue`).

Public face: `catalogue_coverage(manifests_dir, taxonomy) -> Coverage`, `to_markdown(coverage, compare=None)`,
`chart_png(coverage)`, `write_report(coverage, out_dir, compare=None)`.
"""
from mmbu.curation.catalogue.coverage import Coverage, catalogue_coverage, paper_targets
from mmbu.curation.catalogue.report import chart_png, to_markdown, write_report

__all__ = ["Coverage", "catalogue_coverage", "chart_png", "paper_targets", "to_markdown", "write_report"]
