"""The model registry (YAML + pydantic) and box coordinate conventions."""
from mmbu.benchmark_eval.models.box_format import (BoxFormat, SmartResize, describe_convention, from_model_convention,
                                                   model_frame_size, smart_resize, to_model_convention)
from mmbu.benchmark_eval.models.registry import (ChatQuirks, FamilyFacts, ImageLimits, ModelEntry, Registry,
                                                 RegistryError, Sources, SquarePad, ad_hoc_entry, default_registry,
                                                 load_registry, model_slug)

__all__ = ["BoxFormat", "ChatQuirks", "FamilyFacts", "ImageLimits", "ModelEntry", "Registry", "RegistryError", "SmartResize", "Sources", "SquarePad",
           "ad_hoc_entry", "default_registry", "describe_convention", "from_model_convention", "load_registry",
           "model_frame_size", "model_slug", "smart_resize", "to_model_convention"]
