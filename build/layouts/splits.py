"""The `splits` filter of layouts whose path templates have a `{split}` part (`arrays`, `parquet`)."""
from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from mmbu.build.layouts.context import LayoutContext
from mmbu.curation.manifest.hints import did_you_mean

T = TypeVar("T")


def keep_splits(ctx: LayoutContext, splits: list[str] | None, template: str, what: str, items: list[T],
                parts_of: Callable[[T], dict[str, str]]) -> list[T]:
    """The items whose `{split}` part is one of `splits` (all without a filter); a split asked for that no item
    has is reported against `template` ("not among the <what>' splits") with the closest one there is."""
    if not splits:
        return items
    found = sorted({parts_of(item).get("split", "") for item in items})
    for split in splits:
        if split not in found:
            ctx.exclude(template, f"split {split!r} is not among the {what}' splits{did_you_mean(split, found)}")
    return [item for item in items if parts_of(item).get("split") in splits]
