"""What a layout's path patterns find in the fetched files, and what lies nearest when they find nothing: so a manifest
whose layout misses is mended in one edit.

Every path, glob or template a layout names (`images`, `masks`, `table`, `root`, an array's `file`, ...) is matched
against the files under `raw/<id>/`, each `{part}` standing for any text. A pattern that matches nothing is shown with
the fetched paths nearest to it (difflib over path components: a component that the pattern's component matches as
a glob counts as equal) and, when it is only a matter of a top folder, with the edit that mends it: an archive that
unpacks into `synapse-net/` needs `synapse-net/` in front of every pattern, or `*/` to accept any one top folder.
"""
from __future__ import annotations

import difflib
import fnmatch
import os
import re
import typing
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel

from mmbu.curation.manifest.layout_base import DatasetPath
from mmbu.curation.manifest.templates import PathTemplate

FOLDER_FIELDS = frozenset({"root", "image_root", "volumes_root"})  # yolo's `labels` too, unless a template
MAX_LISTED = 200_000  # paths read from a huge archive; the nearest ones are found among these
NEAREST = 3
_PART = re.compile(r"\{[^{}]*\}")


@dataclass
class PatternCheck:
    """One pattern of the layout and what it found."""

    field: str  # e.g. "layout.masks.0"
    pattern: str
    folders: bool  # the pattern names folders, not files
    matched: int
    examples: list[str] = field(default_factory=list)  # a few paths it matched
    nearest: list[str] = field(default_factory=list)  # when it matched nothing: the closest fetched paths
    hint: str | None = None  # the one edit that mends it, when a top folder is all that differs

    def sentence(self) -> str:
        what = "folder" if self.folders else "file"
        if self.matched:
            return f"{self.field} {self.pattern!r} matches {self.matched:,} {what}(s), e.g. {self.examples[0]!r}"
        text = f"{self.field} {self.pattern!r} matches no {what}"
        if self.hint:
            text += f"; {self.hint}"
        if self.nearest:
            text += "; nearest: " + ", ".join(repr(p) for p in self.nearest)
        return text


def layout_patterns(layout: BaseModel) -> list[tuple[str, str, bool]]:
    """(field path, pattern, names folders) for every path pattern of a layout, in field order."""
    found: list[tuple[str, str, bool]] = []
    if getattr(layout, "kind", None) == "folder_per_class":
        root = "" if layout.root in (".", "") else layout.root.rstrip("/") + "/"
        folders = f"{layout.folder_template}/" if layout.folder_template else ""
        found.append(("layout.root + folders + images", f"{root}{folders}{layout.images}", False))
        return found
    _walk(layout, "layout", found)
    return found


def _walk(model: BaseModel, prefix: str, found: list[tuple[str, str, bool]]) -> None:
    for name, info in type(model).model_fields.items():
        value = getattr(model, name)
        where = f"{prefix}.{name}"
        if isinstance(value, BaseModel):
            _walk(value, where, found)
        elif isinstance(value, dict) and value and all(isinstance(v, BaseModel) for v in value.values()):
            for key, item in value.items():
                _walk(item, f"{where}.{key}", found)
        elif value and _is_path(info) and name in model.model_fields_set:  # a default (parquet's card) may be absent
            folders = name in FOLDER_FIELDS or (name == "labels" and getattr(model, "kind", None) == "yolo"
                                                and not model.labels_template())
            if isinstance(value, str):
                if not (folders and value in (".", "")):
                    found.append((where, value, folders))
            else:
                found += [(f"{where}.{index}", text, folders) for index, text in enumerate(value)]


def _is_path(info: typing.Any) -> bool:
    """A field typed `DatasetPath` (alone, optional or in a list)."""
    if DatasetPath.__metadata__[0] in info.metadata:
        return True
    return _mentions_path(info.annotation)


def _mentions_path(annotation: object) -> bool:
    return annotation == DatasetPath or any(_mentions_path(arg) for arg in typing.get_args(annotation))


def fetched_paths(raw_dir: Path, limit: int = MAX_LISTED) -> tuple[list[str], list[str]]:
    """(files, folders) under `raw_dir` as relative POSIX paths, sorted, without dot files and `__MACOSX/`."""
    files, folders = [], []
    for current, dirnames, filenames in os.walk(raw_dir):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d != "__MACOSX")
        base = Path(current).relative_to(raw_dir)
        folders += [(base / d).as_posix() for d in dirnames]
        files += [(base / f).as_posix() for f in sorted(filenames) if not f.startswith(".")]
        if len(files) + len(folders) > limit:
            break
    return sorted(files), sorted(folders)


def check_patterns(layout: BaseModel, raw_dir: Path) -> list[PatternCheck]:
    """Each pattern of the layout with its matches, and for those matching nothing the nearest fetched paths."""
    files, folders = fetched_paths(raw_dir)
    checks = []
    for where, pattern, is_folder in layout_patterns(layout):
        candidates = folders if is_folder else files
        matcher = PathTemplate(_as_glob(pattern))
        matched = [path for path in candidates if matcher.match(path) is not None]
        check = PatternCheck(where, pattern, is_folder, len(matched), examples=matched[:1])
        if not matched:
            check.nearest = nearest_paths(pattern, candidates)
            check.hint = top_folder_hint(pattern, candidates)
        checks.append(check)
    return checks


def _as_glob(pattern: str) -> str:
    """A pattern with every `{part}` (a template's part, a format field) standing for any text of one component."""
    return _PART.sub("*", pattern)


def nearest_paths(pattern: str, candidates: list[str], count: int = NEAREST) -> list[str]:
    """The candidates closest to the pattern: difflib's ratio over path components, a component equal to the
    pattern's when the pattern's (as a glob) matches it; ties go to the closer text."""
    wanted = _as_glob(pattern).split("/")
    scored = []
    for path in candidates:
        parts = path.split("/")
        tokens, position = [], 0
        for part in parts:  # each component takes the first pattern component at or after the last one it matches
            index = next((i for i in range(position, len(wanted)) if fnmatch.fnmatchcase(part, wanted[i])), None)
            if index is None:
                tokens.append(f"={part}")
            else:
                tokens.append(f"#{index}")
                position = index + 1
        components = difflib.SequenceMatcher(None, [f"#{i}" for i in range(len(wanted))], tokens).ratio()
        text = difflib.SequenceMatcher(None, pattern, path).ratio()
        scored.append((-components, -text, path))
    return [path for *_, path in sorted(scored)[:count]]


def top_folder_hint(pattern: str, candidates: list[str]) -> str | None:
    """The edit that mends a pattern whose only fault is a top folder: one the archive adds, or one it lacks."""
    matcher = PathTemplate(_as_glob(pattern))
    for depth in (1, 2):
        for path in candidates:
            parts = path.split("/")
            if len(parts) > depth and matcher.match("/".join(parts[depth:])) is not None:
                top = "/".join(parts[:depth])
                return (f"the files sit under {top + '/'!r}: write {top + '/' + pattern!r} (or "
                        f"{'*/' * depth + pattern!r} to accept any top folder)")
    parts = pattern.split("/")
    if len(parts) > 1 and not _PART.search(parts[0]) and not any(c in parts[0] for c in "*?["):
        rest = "/".join(parts[1:])
        if any(PathTemplate(_as_glob(rest)).match(path) is not None for path in candidates):
            return f"the fetched files have no top folder {parts[0] + '/'!r}: write {rest!r}"
    return None


def top_levels(raw_dir: Path, depth: int = 2, width: int = 12) -> list[str]:
    """The first levels of the fetched tree, each folder with the number of files below it (dot files and
    `__MACOSX/` left out), as indented lines."""
    files, _ = fetched_paths(raw_dir)
    counts: dict[str, int] = {}
    for path in files:
        parts = path.split("/")
        for level in range(1, min(depth, len(parts) - 1) + 1):
            key = "/".join(parts[:level]) + "/"
            counts[key] = counts.get(key, 0) + 1
    lines: list[str] = []
    _level(lines, counts, [p for p in files if "/" not in p], "", 0, depth, width)
    return lines


def _level(lines: list[str], counts: dict[str, int], loose: list[str], prefix: str, level: int, depth: int,
           width: int) -> None:
    here = sorted(k for k in counts if k.startswith(prefix) and k.count("/") == prefix.count("/") + 1)
    indent = "  " * level
    for folder in here[:width]:
        lines.append(f"{indent}{folder[len(prefix):]}  ({counts[folder]:,} files)")
        if level + 1 < depth:
            _level(lines, counts, [], folder, level + 1, depth, width)
    if len(here) > width:
        lines.append(f"{indent}... and {len(here) - width} more folders")
    for name in loose[:width]:
        lines.append(f"{indent}{name}")
    if len(loose) > width:
        lines.append(f"{indent}... and {len(loose) - width} more files")
