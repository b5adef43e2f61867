"""The composition policy (`curation/data/composition.yaml`): how many rows each dataset gives each task, per profile.

A profile is a few generic rules, never a list of datasets: a cap of rows per dataset and task, the rows every label
keeps before the cap is shared out, and how many objects one image gives before the next image's turn. A dataset may
override its caps (and the names of its test split); every other dataset follows the profile. `DatasetRule` is what
one dataset's build needs of it (small and picklable: it travels to the worker with the job).
"""
from __future__ import annotations

import hashlib
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, NonNegativeInt, PositiveInt, model_validator

from mmbu.curation.data import COMPOSITION_PATH, load_yaml_model
from mmbu.curation.manifest.model import TaskName
from mmbu.core.release import TASKS

Caps = dict[TaskName, PositiveInt | None]
"""task -> at most this many rows per dataset (null: every row of that task)."""


class CompositionError(ValueError):
    """The composition file cannot be read or is invalid (the message names the file and field), or a profile
    that it does not define was asked for."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Profile(_Strict):
    description: str
    rows_per_dataset: Caps | None = Field(
        None, description="Cap per dataset and task; null: every row of every task (no selection).")
    min_rows_per_label: NonNegativeInt = Field(
        0, description="A dataset's quota for a task is raised to this many rows per label it has, so that every "
                       "label with enough rows is kept.")
    objects_per_image: PositiveInt = Field(
        1, description="Grounded tasks: objects of one label an image gives before every other image of that label "
                       "has given as many (a dataset with few images still fills its quota).")
    reference_rows: dict[TaskName, PositiveInt] | None = Field(
        None, description="Rows per task the caps were derived for at the full catalogue (the paper's).")

    @model_validator(mode="after")
    def _every_task_capped(self) -> "Profile":
        if self.rows_per_dataset is not None and (missing := [t for t in TASKS if t not in self.rows_per_dataset]):
            raise ValueError(f"rows_per_dataset names no cap for {', '.join(missing)} (write null for every row)")
        return self


class DatasetOverride(_Strict):
    test_splits: list[str] | None = Field(None, description="This dataset's test split names, instead of the file's.")
    rows_per_dataset: dict[str, Caps] = Field(default_factory=dict, description="profile -> task -> cap.")


class DatasetRule(_Strict):
    """The composition of one dataset under one profile: what the build's selection step applies."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    profile: str
    version: int
    seed: int
    caps: Caps | None = Field(description="None: every row (the selection step does not run).")
    min_rows_per_label: int = 0
    objects_per_image: int = 1
    test_splits: tuple[str, ...] = ()

    @property
    def selects(self) -> bool:
        return self.caps is not None and any(cap is not None for cap in self.caps.values())

    def quota(self, task: str, labels: int) -> int | None:
        """At most this many rows of `task` from a dataset with `labels` labels (None: all of them)."""
        cap = (self.caps or {}).get(task)
        return None if cap is None else max(cap, self.min_rows_per_label * labels)


class Composition(_Strict):
    version: PositiveInt = Field(description="Bumped whenever a change to this file changes which rows are taken.")
    seed: int = Field(0, description="Seed of the hash that orders rows (never a random generator's state).")
    default_profile: str = Field(description="The profile of `mmbu build` and `make dataset` without --profile; its "
                                             "release is DATA/release, another profile's DATA/release-<profile>.")
    test_splits: list[str] = Field(
        min_length=1, description="A sample whose source path or part (an array key, a table row) has one of these "
                                  "words (split on anything but letters and digits, any case) is in its dataset's own "
                                  "test split.")
    profiles: dict[str, Profile] = Field(min_length=1)
    overrides: dict[str, DatasetOverride] = Field(default_factory=dict, description="dataset id -> its exceptions.")

    @model_validator(mode="after")
    def _names_known(self) -> "Composition":
        if self.default_profile not in self.profiles:
            raise ValueError(f"default_profile {self.default_profile!r} is not one of the profiles")
        for dataset_id, override in self.overrides.items():
            for profile in override.rows_per_dataset:
                if profile not in self.profiles:
                    raise ValueError(f"overrides.{dataset_id}.rows_per_dataset names the unknown profile {profile!r}")
        return self

    def profile(self, name: str) -> Profile:
        if name not in self.profiles:
            raise CompositionError(f"--profile {name}: not a profile of the composition file (it has "
                                   f"{', '.join(self.profiles)})")
        return self.profiles[name]

    def rule_for(self, dataset_id: str, profile: str) -> DatasetRule:
        chosen = self.profile(profile)
        override = self.overrides.get(dataset_id, DatasetOverride())
        caps = chosen.rows_per_dataset
        if caps is not None and profile in override.rows_per_dataset:
            caps = {**caps, **override.rows_per_dataset[profile]}
        return DatasetRule(profile=profile, version=self.version, seed=self.seed, caps=caps,
                           min_rows_per_label=chosen.min_rows_per_label, objects_per_image=chosen.objects_per_image,
                           test_splits=tuple(word.lower() for word in (override.test_splits or self.test_splits)))


class LoadedComposition(BaseModel):
    """A composition with where it came from (the card and build_info.json name the file and its sha256)."""

    path: Path
    sha256: str
    composition: Composition

    def stamp(self, profile: str) -> dict[str, object]:
        """What a release records of its composition: profile, version, seed, file."""
        return {"profile": profile, "version": self.composition.version, "seed": self.composition.seed,
                "file": self.path.name, "sha256": self.sha256,
                "description": self.composition.profile(profile).description}


def load_composition(path: Path | None = None) -> LoadedComposition:
    """The composition file (default: the bundled `curation/data/composition.yaml`); CompositionError naming the file
    and field when it cannot be used."""
    path = Path(path or COMPOSITION_PATH)
    composition = load_yaml_model(path, Composition, CompositionError, "composition file")
    return LoadedComposition(path=path, sha256=hashlib.sha256(path.read_bytes()).hexdigest(), composition=composition)
