"""What the paper reports about its catalogue (`curation/data/paper_targets.yaml`), and the paper's kinds of source."""
from __future__ import annotations

from importlib import resources

from pydantic import BaseModel

from mmbu.core.release import Task
from mmbu.core.yaml_io import parse_yaml
from mmbu.curation.manifest import DatasetManifest

SOURCE_KINDS = ("classification", "segmentation", "detection")


class PaperTargets(BaseModel):
    datasets: int
    samples: int
    modalities: int
    sub_modalities: int
    sources_by_kind: dict[str, int]
    topics: int | None = None


def paper_targets() -> PaperTargets:
    text = resources.files("mmbu.curation.data").joinpath("paper_targets.yaml").read_text(encoding="utf-8")
    return PaperTargets.model_validate(parse_yaml(text, "paper_targets.yaml"))


def source_kind(manifest: DatasetManifest) -> str:
    """The paper's kind of source: masks make a segmentation source, boxes a detection source."""
    if Task.MASK_GROUNDED in manifest.tasks:
        return "segmentation"
    if {Task.DETECTION, Task.BOX_GROUNDED} & set(manifest.tasks):
        return "detection"
    return "classification"


def expected_samples(manifest: DatasetManifest) -> int | None:
    """The images (or volumes) the manifest's source states, None when it states none."""
    return manifest.evidence.samples.count if manifest.evidence else None
