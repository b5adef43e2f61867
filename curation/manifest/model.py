"""The dataset manifest model. Structure only; taxonomy and licence checks are in `validate.py`."""
from __future__ import annotations

from dataclasses import fields as dataclass_fields
from pathlib import Path
from typing import Literal

import yaml
from pydantic import (
    BaseModel, ConfigDict, Field, NonNegativeInt, PositiveInt, ValidationError, field_validator, model_validator,
)

from mmbu.curation.manifest.evidence import Evidence
from mmbu.curation.manifest.hints import pydantic_hint
from mmbu.core import budget
from mmbu.core.release import METADATA_FIELDS, TASKS
from mmbu.curation.manifest.layout import Layout
from mmbu.curation.manifest.source import Source
from mmbu.core.yaml_io import describe_yaml_error, read_yaml
from mmbu.core.text import shorten

_BUDGET_FIELDS = {item.name: item for item in dataclass_fields(budget.Budget)}
TaskName = Literal[TASKS]  # the release's task configs (mmbu.core.release), as the manifests spell them
# metadata field -> taxonomy facet holding its closed vocabulary (the other fields are free text)
METADATA_FACETS = {
    "domain": "domain",
    "modality": "modality",
    "sub_modality": "sub_modality",
    "stain": "stain",
    "specimen": "specimen",
    "specimen_subregion": "anatomy",
}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ManifestError(ValueError):
    """A manifest cannot be read or parsed; the message names the file and the field.

    `problems` holds every (field path, reason) pair found, so a validator can report them all;
    the field path is "(file)" when the file itself cannot be read or parsed.
    """

    def __init__(self, path: Path, problems: list[tuple[str, str]]) -> None:
        self.path = path
        self.problems = [(field, shorten(reason)) for field, reason in problems]  # never a 10 MB value whole
        super().__init__("\n".join(f"{path}: {field}: {reason}" for field, reason in self.problems))


class DatasetMetadata(_Strict):
    """Dataset-level values of the 13 metadata fields (per-sample values found in files may override).

    `domain`, `modality`, `sub_modality`, `stain`, `specimen` and `specimen_subregion` must be
    taxonomy terms (facets domain, modality, sub_modality, stain, specimen, anatomy).
    """

    image_source: str
    dataset_name: str
    domain: str
    modality: str
    sub_modality: str
    stain: str | None = None
    specimen: str
    specimen_subregion: str | None = None
    topic: str
    original_task: str
    context: str | None = None
    institution: str | None = None
    url: str


class LabelSpec(_Strict):
    name: str = Field(description="Display name used in questions and answers.")
    synonyms: list[str] = Field(default_factory=list, description="Accepted equivalents for open answers.")
    sub_modality: str | None = Field(
        None, description="This class's sub-modality when its images are of another kind than the dataset's "
                          "`metadata.sub_modality` (a time-of-flight angiography series among T2-weighted ones); its "
                          "samples' metadata rows carry it. The questions of such a dataset name no sub-modality, "
                          "which would give the answer away.")


class QuestionHints(_Strict):
    options_name: str = Field(description='Noun phrase for what is asked, e.g. "cell type".')
    target_name: str | None = Field(None, description="Noun phrase for detection targets, e.g. 'parasite-infected cell'.")
    preparation: str | None = Field(None, description="Specimen preparation for the full context: smear, section, ...")
    n_options: int = Field(5, ge=2, le=26)
    none_of_the_above: bool = True
    distractors: list[str] = Field(
        [], description="Wrong options for closed classification questions when the dataset has fewer labels than "
                        "options: other things of the same kind that the outlined region or the image is not (for "
                        "'cell nucleus' asked as a cellular structure: cytoplasm, cell membrane). Never a wording, a "
                        "kind or a part of one of the dataset's labels. The dataset's own labels are used first.")


class VideoFrames(_Strict):
    """Which frames of each video become samples: an index list, or one frame every N seconds.

    Each chosen frame is its own sample (id: the video's path plus the frame). A label table with a
    `frame_column` names the frames row by row instead, and then this is not needed.
    """

    frames: list[NonNegativeInt] | None = Field(
        None, min_length=1, description="0-based frame indices (frame N is shown at N / frame rate).")
    every_seconds: float | None = Field(
        None, gt=0, description="One frame every this many seconds, from 0 s to the video's end.")
    max_frames: int | None = Field(None, ge=1, description="At most this many frames per video (the first ones).")

    @model_validator(mode="after")
    def _one_choice(self) -> "VideoFrames":
        if (self.frames is None) == (self.every_seconds is None):
            raise ValueError("give exactly one of frames (an index list) and every_seconds")
        if self.frames is not None and len(set(self.frames)) != len(self.frames):
            raise ValueError("frames lists an index twice")
        return self


class ConvertSpec(_Strict):
    """How this dataset's images become PNGs (passed to mmbu.build.convert)."""

    frame: int | Literal["middle"] = "middle"
    slice: int | Literal["middle", "mask_max_area"] = "middle"
    axis: int = Field(2, ge=0, le=2)
    window: tuple[float, float] | None = Field(None, description="(center, width) to force a window.")
    max_size: int | None = Field(None, ge=16)
    square_pixels: bool = Field(
        True,
        description="Resample non-square pixels (DICOM Pixel Spacing, Imager Pixel Spacing or Pixel Aspect Ratio; "
                    "NIfTI voxel spacing in the shown plane) to square ones by enlarging the coarser axis. "
                    "false keeps the stored grid (e.g. when the dataset's spacing headers are known to be wrong).",
    )
    series: NonNegativeInt | Literal["each"] | str = Field(
        0, description="Vendor microscopy (CZI scenes, LIF images, ND2 positions, VSI scenes): 'each' makes every "
                       "series its own sample; an index or a series name picks one.")
    z: NonNegativeInt | Literal["middle"] = Field(
        "middle", description="Z plane of vendor microscopy series; section of an MRC volume or of an HDF5 volume "
                              "(arrays, axes DHW) when `slice` is not an index or mask_max_area.")
    t: NonNegativeInt | Literal["middle"] = Field("middle", description="Time point of vendor microscopy series.")
    video: VideoFrames | None = Field(
        None, description="Frames of each video (MP4, AVI, MKV) to sample; without it one frame, `frame` "
                          "(default the middle), per video.")

    @field_validator("series")
    @classmethod
    def _series_named(cls, value: object) -> object:
        if isinstance(value, str) and not value.strip():
            raise ValueError("series is an index, a series name or 'each', not an empty text")
        return value


class BudgetSpec(_Strict):
    """What one item of this dataset may cost (`mmbu.core.budget`); each limit may only be set lower than the
    toolkit's default (raise one for every dataset with its `MMBU_MAX_*` environment variable)."""

    max_pixels: PositiveInt | None = Field(None, description=_BUDGET_FIELDS["max_pixels"].metadata["description"])
    max_bytes: PositiveInt | None = Field(None, description=_BUDGET_FIELDS["max_bytes"].metadata["description"])
    max_slices: PositiveInt | None = Field(None, description=_BUDGET_FIELDS["max_slices"].metadata["description"])
    max_instances: PositiveInt | None = Field(None, description=_BUDGET_FIELDS["max_instances"].metadata["description"])
    max_json_values: PositiveInt | None = Field(None,
                                                description=_BUDGET_FIELDS["max_json_values"].metadata["description"])

    @model_validator(mode="after")
    def _only_lower(self) -> "BudgetSpec":
        for name, value in self.limits().items():
            default = _BUDGET_FIELDS[name].default
            if value > default:
                raise ValueError(f"{name} {value:,} is above the toolkit's {default:,}: a manifest may only lower the "
                                 f"budget (raise it for every dataset with {budget.SETTINGS[name]})")
        return self

    def limits(self) -> dict[str, int]:
        """The limits this manifest sets (for `mmbu.core.budget.limited`)."""
        return {name: value for name, value in self.model_dump().items() if value is not None}


class CurationEvent(_Strict):
    round: Literal[1, 2, 3]
    decision: Literal["nominated", "accepted", "rejected", "promoted"]
    reviewers: list[str] = Field(default_factory=list)
    date: str | None = None
    note: str | None = None


class CurationHistory(_Strict):
    round: Literal[1, 2, 3] = Field(description="The last round this dataset passed.")
    reviewers: list[str] = Field(min_length=1)
    nominated_by: str | None = None
    history: list[CurationEvent] = Field(default_factory=list)


class DatasetManifest(_Strict):
    id: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]*$", description="Stable id; equals the file name stem.")
    title: str
    source: Source
    license: str = Field(description="SPDX licence id of the source dataset.")
    citation: str
    homepage: str | None = None
    tasks: list[TaskName] = Field(min_length=1)
    layout: Layout
    convert: ConvertSpec = Field(default_factory=ConvertSpec)
    metadata: DatasetMetadata
    labels: dict[str, str | LabelSpec] = Field(min_length=1, description="Raw label -> display name.")
    questions: QuestionHints
    curation: CurationHistory
    budget: BudgetSpec | None = Field(
        None, description="Lower limits than the toolkit's for what one image, volume, cell or annotation file of "
                          "this dataset may cost (docs/security.md).")
    evidence: Evidence | None = Field(
        None, description="Where host, licence, layout, label provenance and sample count were read, with a level "
                          "each; `mmbu manifests validate` requires it (the build only prints its level).")

    @field_validator("labels", mode="before")
    @classmethod
    def _labels_keys_as_text(cls, value: object) -> object:
        # YAML reads `0: background` with an integer key; raw labels are compared as text everywhere.
        if isinstance(value, dict):
            return {str(key) if isinstance(key, (int, float)) and not isinstance(key, bool) else key: item
                    for key, item in value.items()}
        return value

    def label_spec(self, raw: str) -> LabelSpec | None:
        """The display name and synonyms for a raw label, or None if it is not in the vocabulary."""
        entry = self.labels.get(str(raw))
        if entry is None:
            return None
        return LabelSpec(name=entry) if isinstance(entry, str) else entry

    def sub_modality_varies(self) -> bool:
        """Whether some label states its own sub-modality (then the sub-modality tells the classes apart)."""
        return any(isinstance(entry, LabelSpec) and entry.sub_modality for entry in self.labels.values())


def load_manifest(path: str | Path) -> DatasetManifest:
    """Parse one manifest file. Raises ManifestError naming the file and every bad field."""
    path = Path(path)
    try:
        document = read_yaml(path)
    except OSError as exc:
        raise ManifestError(path, [("(file)", f"cannot read the file ({exc.strerror or exc})")]) from None
    except UnicodeDecodeError as exc:
        raise ManifestError(path, [("(file)", f"not UTF-8 text ({exc.reason} at byte {exc.start})")]) from None
    except yaml.YAMLError as exc:
        raise ManifestError(path, [("(file)", f"not valid YAML: {describe_yaml_error(exc)}")]) from None
    if not isinstance(document, dict):
        kind = "empty" if document is None else f"a YAML {type(document).__name__}"
        raise ManifestError(path, [("(top level)", f"a manifest is a mapping of fields, this file is {kind}")])
    try:
        return DatasetManifest.model_validate(document)
    except ValidationError as exc:
        raise ManifestError(path, [(field_path(document, err["loc"]), err["msg"] + pydantic_hint(err, DatasetManifest))
                                   for err in exc.errors()]) from None


def field_path(document: object, loc: tuple) -> str:
    """Dotted path of a pydantic error location as the author wrote it.

    Pydantic puts the tag of a discriminated union into the location (`source.zenodo.record`); the
    manifest has no such key, so a step that matches the node's `kind` instead of one of its keys is dropped.
    """
    parts: list[str] = []
    node = document
    for step in loc:
        if isinstance(node, dict) and step not in node and node.get("kind") == step:
            continue
        parts.append(str(step))
        if isinstance(node, dict):
            node = node.get(step)
        elif isinstance(node, list) and isinstance(step, int) and 0 <= step < len(node):
            node = node[step]
        else:
            node = None
    return ".".join(parts) or "(top level)"
