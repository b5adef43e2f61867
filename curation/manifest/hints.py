"""'Did you mean' hints for names a manifest author types: fields and layout kinds, table columns,
array keys, JSON fields, raw labels.

The manifest loader uses them for what it can check without the data (a misspelt field or kind);
the layout readers use them for what only the fetched files reveal (a column or key that is not there).
"""
from __future__ import annotations

import difflib
import re
import types
import typing
from collections.abc import Iterable

from pydantic import BaseModel


def closest_name(value: str, choices: Iterable[str], cutoff: float = 0.6) -> str | None:
    """The choice spelled most like `value` (case-insensitive), or None when nothing is close."""
    by_folded: dict[str, str] = {}
    for choice in choices:
        by_folded.setdefault(str(choice).casefold(), str(choice))
    match = difflib.get_close_matches(str(value).casefold(), list(by_folded), n=1, cutoff=cutoff)
    return by_folded[match[0]] if match else None


def did_you_mean(value: str, choices: Iterable[str], *, listing: int = 8) -> str:
    """A clause for the end of an error sentence: "; did you mean 'x'?", else the first few choices."""
    choices = [str(c) for c in choices]
    suggestion = closest_name(value, choices)
    if suggestion is not None:
        return f"; did you mean {suggestion!r}?"
    if not choices:
        return ""
    shown = ", ".join(repr(c) for c in choices[:listing])
    more = f" and {len(choices) - listing} more" if len(choices) > listing else ""
    return f" (found: {shown}{more})"


def pydantic_hint(error: dict, root: type[BaseModel]) -> str:
    """A hint for one pydantic error of a document validated as `root`: for a field the model does not
    have, the allowed field spelled most like it; for an unknown `kind`, the closest kind."""
    if error.get("type") == "union_tag_invalid":
        ctx = error.get("ctx") or {}
        return did_you_mean(str(ctx.get("tag", "")), re.findall(r"'([^']+)'", str(ctx.get("expected_tags", ""))))
    if error.get("type") == "extra_forbidden":
        model = _model_at(root, tuple(error["loc"][:-1]))
        if model is not None:
            return did_you_mean(str(error["loc"][-1]), model.model_fields)
    return ""


def _model_at(root: type[BaseModel], loc: tuple) -> type[BaseModel] | None:
    """The pydantic model that validated the node at `loc` (discriminated unions stepped by their tag)."""
    node: object = root
    for step in loc:
        node = _step(node, step)
        if node is None:
            return None
    node = _unwrap(node)
    return node if isinstance(node, type) and issubclass(node, BaseModel) else None


def _unwrap(annotation: object) -> object:
    while typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    return annotation


def _step(node: object, step: object) -> object | None:
    node = _unwrap(node)
    if isinstance(node, type) and issubclass(node, BaseModel):
        field = node.model_fields.get(str(step))
        return field.annotation if field is not None else None
    origin, args = typing.get_origin(node), typing.get_args(node)
    if origin in (list, tuple) and isinstance(step, int) and args:
        return args[0]
    if origin is dict and args:
        return args[1]
    members = [_unwrap(a) for a in args] if origin in (typing.Union, types.UnionType) else []
    for member in members:  # a tagged member first (pydantic puts the tag into the location) ...
        if isinstance(member, type) and issubclass(member, BaseModel) and "kind" in member.model_fields:
            if step in typing.get_args(member.model_fields["kind"].annotation):
                return member
    for member in members:  # ... then the first member that can hold this step
        found = _step(member, step)
        if found is not None:
            return found
    return None
