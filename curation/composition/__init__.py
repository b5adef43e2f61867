"""The benchmark's composition: how many rows each dataset gives each task under a profile (`paper`, `full`, `mini`).

Public face: `load_composition(path=None) -> LoadedComposition` (the bundled `curation/data/composition.yaml` by
default), `Composition`, `Profile`, `DatasetRule` (one dataset's rule under one profile: what the build's selection
step applies, `mmbu.build.selection`), `CompositionError`. What each profile yields per dataset, task and modality,
projected from the manifests, is `mmbu.curation.catalogue.composition`.
"""
from mmbu.curation.composition.policy import (
    Composition, CompositionError, DatasetOverride, DatasetRule, LoadedComposition, Profile, load_composition,
)

__all__ = ["Composition", "CompositionError", "DatasetOverride", "DatasetRule", "LoadedComposition", "Profile",
           "load_composition"]
