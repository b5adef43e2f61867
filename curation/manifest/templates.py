"""Path templates with named parts, for layouts whose files are related by name rather than by stem.

    case_{id}/imaging.nii.gz            <->  case_{id}/segmentation.nii.gz          (KiTS19)
    {label}/{stem}.png                  <->  {label}/{stem}_mask_{n:d}.png           (BUSI's second lesion)
    {split}/{label}/*.jpeg                                                           (Kermany: split above class)

`{name}` stands for one or more characters inside one path segment (no `/`), `{name:d}` for digits
only; a name used twice must match the same text both times. `*`, `?` and `**` keep their glob
meaning. Everything else is literal. Templates are relative to the dataset's raw folder.
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from functools import cached_property
from pathlib import Path

from mmbu.core.confinement import inside

_PART = re.compile(r"\{([^{}]*)\}")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(?::d)?$")


class TemplateError(ValueError):
    """A template that cannot be parsed; the message says where and why."""


class PathTemplate:
    """A parsed template: what it matches, which parts it names, and how to list its files."""

    def __init__(self, text: str, choices: Mapping[str, Iterable[str]] | None = None) -> None:
        """`choices` limits a part to listed values (the channel files' `w1`, `w2`, `w3`), so the parts around it
        may hold the separator it follows (`{field}_{channel}` over `A01_f00_w1`)."""
        self.text = text
        self._choices = {name: tuple(values) for name, values in (choices or {}).items()}
        self._pieces: list[tuple[str, str]] = []  # ("literal", text) | ("part", name) | ("digits", name)
        position = 0
        for found in _PART.finditer(text):
            self._literal(text[position:found.start()])
            spec = found.group(1)
            if not _NAME.match(spec):
                raise TemplateError(f"{text!r}: {{{spec}}} is not a part name (letters, digits and _, "
                                    "optionally ':d' for digits only)")
            name, _, digits = spec.partition(":")
            self._pieces.append(("digits" if digits else "part", name))
            position = found.end()
        self._literal(text[position:])
        if text.startswith("/") or ".." in Path(text).parts:
            raise TemplateError(f"{text!r}: a template is relative to the dataset folder and stays inside it")

    def _literal(self, chunk: str) -> None:
        if "{" in chunk or "}" in chunk:
            raise TemplateError(f"{self.text!r}: unbalanced brace in {chunk!r}")
        if chunk:
            self._pieces.append(("literal", chunk))

    @cached_property
    def names(self) -> tuple[str, ...]:
        """The part names in order of first appearance."""
        return tuple(dict.fromkeys(name for kind, name in self._pieces if kind != "literal"))

    @cached_property
    def glob(self) -> str:
        """A pathlib glob listing every candidate file (each part as `*`)."""
        return "".join(value if kind == "literal" else "*" for kind, value in self._pieces)

    @cached_property
    def _regex(self) -> re.Pattern[str]:
        out, seen = [], set()
        for kind, value in self._pieces:
            if kind == "literal":
                out.append(_glob_to_regex(value))
            elif value in seen:
                out.append(f"(?P={value})")
            else:
                seen.add(value)
                if value in self._choices:
                    alternatives = "|".join(re.escape(c) for c in sorted(self._choices[value], key=len, reverse=True))
                    out.append(f"(?P<{value}>{alternatives})")
                else:
                    out.append(f"(?P<{value}>\\d+)" if kind == "digits" else f"(?P<{value}>[^/]+?)")
        return re.compile("".join(out))

    def match(self, relative_path: str) -> dict[str, str] | None:
        """The named parts of a POSIX path relative to the dataset folder, or None if it does not match."""
        found = self._regex.fullmatch(relative_path)
        return found.groupdict() if found else None

    def fill(self, parts: Mapping[str, str]) -> str:
        """The path with every named part replaced (all names must be given)."""
        missing = [n for n in self.names if n not in parts]
        if missing:
            raise KeyError(f"{self.text!r} needs the part(s) {', '.join(missing)}")
        return "".join(value if kind == "literal" else str(parts[value]) for kind, value in self._pieces)

    def scan(self, root: Path) -> Iterator[tuple[Path, dict[str, str]]]:
        """Every file under `root` that matches, with its parts, in sorted (stable) order."""
        for path in sorted(root.glob(self.glob)):
            if not path.is_file() or is_hidden(path.relative_to(root)) or not inside(root, path):
                continue  # a link out of the dataset's folder is never read
            parts = self.match(path.relative_to(root).as_posix())
            if parts is not None:
                yield path, parts

    def __repr__(self) -> str:
        return f"PathTemplate({self.text!r})"


def is_hidden(relative: Path) -> bool:
    """Files the archive tools leave behind: dot files, AppleDouble `._x` and `__MACOSX/` copies."""
    return any(part.startswith(".") or part == "__MACOSX" for part in relative.parts)


def _glob_to_regex(chunk: str) -> str:
    out, index = [], 0
    while index < len(chunk):
        if chunk.startswith("**/", index):
            out.append("(?:[^/]+/)*")
            index += 3
        elif chunk.startswith("**", index):
            out.append(".*")
            index += 2
        elif chunk[index] == "*":
            out.append("[^/]*")
            index += 1
        elif chunk[index] == "?":
            out.append("[^/]")
            index += 1
        else:
            out.append(re.escape(chunk[index]))
            index += 1
    return "".join(out)


def parse_template(text: str) -> PathTemplate:
    """Parse a template, raising TemplateError (a ValueError, so pydantic reports it on the field)."""
    return PathTemplate(text)
