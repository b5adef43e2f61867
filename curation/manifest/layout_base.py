"""What every layout model shares: strict fields, and the two questions the validator asks of a layout."""
from __future__ import annotations

from collections.abc import Iterator

from pydantic import BaseModel, ConfigDict

# metadata field -> column of a label table holding a per-sample value for it
MetadataColumns = dict[str, str]


CLASSIFY = frozenset({"ungrounded_classification"})
BOXES = frozenset({"box_grounded_classification", "object_detection"})
MASKS = frozenset({"mask_grounded_classification"})


class LayoutBase(BaseModel):
    """The base of every layout model: unknown fields are errors."""

    model_config = ConfigDict(extra="forbid")

    def feeds(self) -> frozenset[str]:
        """The tasks this layout can feed (the validator rejects a manifest asking for others)."""
        raise NotImplementedError

    def declared_labels(self) -> Iterator[tuple[str, str]]:
        """(field path, raw label) for every raw label written in the layout itself; each must be in `labels`."""
        return iter(())
