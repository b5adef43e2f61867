"""Keeping every path a manifest names inside the folder it belongs to.

A manifest is contributed data: its layout paths (tables, annotation files, image globs, templates) are
relative to the dataset's folder `raw/<id>/`, and a `local` source is relative to the repository. A
path that is absolute or climbs out with `..`, or a symbolic link that points elsewhere, would let a
manifest read (and publish in a release) any file the builder can read. So the rule is checked twice:

* `lexical_problem` on the text, when the manifest is validated (no file system needed);
* `confine` / `inside` after resolving symbolic links, when the build opens the file.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path, PurePosixPath

_DRIVE = re.compile(r"^[A-Za-z]:")


class OutsideFolder(ValueError):
    """A path resolves outside the folder it must stay in; the message names the path and the folder."""


def lexical_problem(value: str, folder: str = "the dataset's folder raw/<id>/") -> str | None:
    """Why the path or glob `value` could leave `folder`, or None: absolute, `~`, a drive, `..`, a NUL."""
    text = value.replace("\\", "/")
    if "\0" in text:
        return "holds a NUL character"
    if text.startswith(("/", "~")) or _DRIVE.match(text):
        return f"is absolute; write it relative to {folder}"
    if ".." in PurePosixPath(text).parts:
        return f"climbs out with '..'; every path stays inside {folder}"
    return None


def stays_inside(folder: str) -> Callable[[str], str]:
    """A pydantic validator refusing a path that `lexical_problem` says could leave `folder`."""
    def check(value: str) -> str:
        problem = lexical_problem(value, folder)
        if problem:
            raise ValueError(f"{value!r} {problem}")
        return value

    return check


def inside(folder: Path, path: Path) -> bool:
    """Whether `path`, with symbolic links resolved, lies in `folder` (also resolved)."""
    try:
        return Path(path).resolve().is_relative_to(Path(folder).resolve())
    except (OSError, RuntimeError):  # a symlink loop
        return False


def confine(folder: Path, *parts: str, what: str = "the path") -> Path:
    """`folder / parts`, or OutsideFolder when it resolves (through `..` or a link) outside `folder`."""
    path = Path(folder).joinpath(*parts)
    if not inside(folder, path):
        shown = "/".join(parts)
        raise OutsideFolder(f"{what} {shown!r} resolves outside {folder} (to {path.resolve()}); a manifest may only "
                            f"read files inside its dataset's folder")
    return path
