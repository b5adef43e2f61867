"""Reading YAML that a contributor, a reviewer or an attacker wrote: safe, strict and bounded.

Every YAML file of the toolkit (manifests, reviewer files, the lock, the taxonomy, the model registry,
settings) is read through `parse_yaml` / `read_yaml`:

* safe: only plain data (PyYAML's safe constructor), never Python objects;
* strict: a key written twice in one mapping is an error naming both lines (`license:` twice would
  otherwise validate with the last value winning, unseen by the reviewer who read the first);
* bounded: libyaml refuses nesting deeper than 1,000 levels with an ordinary `YAMLError`; where PyYAML
  runs without libyaml, the recursion that deep nesting causes is turned into the same kind of error;
* fast: libyaml's parser when installed (PyPI's wheels carry it), about ten times PyYAML's own.

YAML the toolkit writes (the lock, dataset cards, promoted manifests) goes through `dump_yaml`: libyaml's
emitter when installed (4–5× PyYAML's own on the lock; the same text), PyYAML's otherwise.

Errors are `yaml.YAMLError`s, so the callers' one-sentence handling (file and line) covers them.
"""
from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import yaml
from yaml.constructor import ConstructorError
from yaml.nodes import MappingNode

_Base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_Dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class StrictLoader(_Base):  # type: ignore[misc, valid-type]
    """The safe loader, refusing duplicate keys."""

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *anchor`; explicit keys may override it
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.get(key)
            except TypeError:  # an unhashable key; the base class reports it
                continue
            if first is not None:
                raise ConstructorError(
                    "while reading a mapping", node.start_mark,
                    f"found the key {_short(key)!r} twice (lines {first + 1} and {key_node.start_mark.line + 1}); "
                    "keep one", key_node.start_mark)
            seen[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep=deep)


def parse_yaml(text: str | bytes, source: str = "<text>") -> Any:
    """The data of one YAML document (see the module docstring for what is refused)."""
    stream = io.BytesIO(text) if isinstance(text, bytes) else io.StringIO(text)
    stream.name = source  # error marks name the file, not "<unicode string>"
    try:
        return yaml.load(stream, Loader=StrictLoader)  # noqa: S506 - StrictLoader is a safe loader
    except RecursionError:
        raise yaml.YAMLError(f"{source}: the YAML is nested too deeply to read") from None


def read_yaml(path: str | Path) -> Any:
    """`parse_yaml` of a UTF-8 file (OSError and UnicodeDecodeError reach the caller as they are)."""
    path = Path(path)
    return parse_yaml(path.read_text(encoding="utf-8"), str(path))


def dump_yaml(data: Any, *, sort_keys: bool = True) -> str:
    """Plain data as block YAML, Unicode kept (what `yaml.safe_dump(..., allow_unicode=True)` writes)."""
    return yaml.dump(data, Dumper=_Dumper, sort_keys=sort_keys, allow_unicode=True)


def _short(value: Any, limit: int = 60) -> Any:
    text = str(value)
    return value if len(text) <= limit else text[:limit] + "…"


def describe_yaml_error(error: yaml.YAMLError) -> str:
    """A YAML error as one line: what is wrong and where (PyYAML's own text spans several lines)."""
    problem = getattr(error, "problem", None)
    if not problem:
        return " ".join(str(error).split())
    context = getattr(error, "context", None)
    mark = getattr(error, "problem_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    return f"{(context + ': ') if context else ''}{' '.join(problem.split())}{where}"
