"""A contributor's first fetch of one dataset (`mmbu manifests try ID`): fetched, read by its layout, built into
questions, with a diagnosis of the layout's patterns when it finds nothing.

Public names: `try_dataset(manifest_path, manifest, data_dir, ...) -> TrialReport`, `report_lines`, `draw_rows`.
"""
from mmbu.build.trial.render import draw_rows, report_lines, sampled_rows
from mmbu.build.trial.run import TrialReport, try_dataset

__all__ = ["TrialReport", "draw_rows", "report_lines", "sampled_rows", "try_dataset"]
