"""Reading YAML that a contributor, a reviewer or an attacker wrote: safe, strict and bounded.

Every YAML file of the toolkit (manifests, reviewer files, the lock, the taxonomy, the model registry,
settings) is read through `parse_yaml` / `read_yaml`:

* safe: only plain data (PyYAML's safe constructor), never Python objects;
* strict: a key written twice in one mapping is an error naming both lines (`license:` twice would
  otherwise validate with the last value winning, unseen by the reviewer who read the first);
* bounded: libyaml refuses nesting deeper than 1,000 levels with an ordinary `YAMLError`; where PyYAML
  runs without libyaml, the recursion that deep nesting causes is turned into the same kind of error;
  aliases (`*name`) may add at most `ALIAS_EXPANSION_LIMIT` nodes to what is written, and may not refer
  to a node that holds them. PyYAML shares an aliased node's object rather than copying it, so a
  "billion laughs" document of 3 KB loads in microseconds, but everything that walks the data after
  (validation, JSON, an error message quoting it) walks the expanded tree: gigabytes;
* fast: libyaml's parser when installed (PyPI's wheels carry it), about ten times PyYAML's own.

YAML the toolkit writes (the lock, dataset cards, promoted manifests) goes through `dump_yaml`: libyaml's
emitter when installed (4–5× PyYAML's own on the lock; the same text), PyYAML's otherwise.

Errors are `yaml.YAMLError`s, so the callers' one-sentence handling (file and line) covers them.
"""
from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any

import yaml
from yaml.constructor import ConstructorError
from yaml.nodes import CollectionNode, MappingNode, Node

_Base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_Dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
# Nodes that aliases may add to a document beyond those written in it: ample for anchors of shared defaults
# (`<<: *defaults`), far below a bomb (nine levels of nine aliases: 387 million).
ALIAS_EXPANSION_LIMIT = 100_000


class StrictLoader(_Base):  # type: ignore[misc, valid-type]
    """The safe loader, refusing duplicate keys and alias bombs."""

    def construct_document(self, node: Node) -> Any:
        _check_alias_expansion(node)
        return super().construct_document(node)

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


# A Markdown file's YAML header, as huggingface_hub's cards find it (`huggingface_hub.repocard.REGEX_YAML_BLOCK`).
_FRONT_MATTER = re.compile(r"^(\s*---[\r\n]+)([\S\s]*?)([\r\n]+---(\r\n|\n|$))")


def parse_front_matter(text: str, source: str = "<text>") -> Any:
    """The data of a Markdown file's `---` YAML header (a dataset card's), or None when it has none;
    `parse_yaml`'s rules apply (huggingface_hub's own card loader uses plain `yaml.safe_load`)."""
    match = _FRONT_MATTER.search(text)
    return parse_yaml(match.group(2), source) if match else None


def read_yaml(path: str | Path) -> Any:
    """`parse_yaml` of a UTF-8 file (OSError and UnicodeDecodeError reach the caller as they are)."""
    path = Path(path)
    return parse_yaml(path.read_text(encoding="utf-8"), str(path))


def dump_yaml(data: Any, *, sort_keys: bool = True) -> str:
    """Plain data as block YAML, Unicode kept (what `yaml.safe_dump(..., allow_unicode=True)` writes)."""
    return yaml.dump(data, Dumper=_Dumper, sort_keys=sort_keys, allow_unicode=True)


def _check_alias_expansion(root: Node) -> None:
    """Refuse a node graph whose tree, aliases expanded, has ALIAS_EXPANSION_LIMIT nodes more than the graph.

    The composer turns every `*alias` into a second reference to its anchor's node, so the document is a graph
    and its expanded size is counted over the graph (each node once, children first, without recursion: nesting
    may be 1,000 deep). A node reached again while its own children are being counted is an alias to an
    ancestor: a recursive structure, which no walker of the data can finish."""
    expanded: dict[int, int] = {}
    open_nodes: set[int] = set()
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if children_done:
            open_nodes.discard(key)
            expanded[key] = 1 + sum(expanded[id(child)] for child in _children(node))
            continue
        if key in expanded:
            continue
        if key in open_nodes:
            raise ConstructorError(None, None, "an alias refers to a node that contains it (a recursive "
                                   "structure); write the data out", node.start_mark)
        open_nodes.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in _children(node) if id(child) not in expanded)
    written = len(expanded)
    if expanded[id(root)] - written > ALIAS_EXPANSION_LIMIT:
        raise ConstructorError(None, None, f"aliases expand {written} written nodes to {expanded[id(root)]}, more "
                               f"than the {ALIAS_EXPANSION_LIMIT} extra nodes allowed (an alias bomb?)",
                               root.start_mark)


def _children(node: Node) -> list[Node]:
    if not isinstance(node, CollectionNode):
        return []
    if isinstance(node, MappingNode):
        return [part for pair in node.value for part in pair]
    return list(node.value)


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
